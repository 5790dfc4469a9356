package discovery

import (
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/nodeurl"
)

// Security is the getpingd-xmpp:PubSub security value of an access model.
func Security(model hub.AccessModel) string {
	if model == hub.AccessWhitelist {
		return getpingd.SecurityWhitelist
	}
	return getpingd.SecurityNone
}

// NewDescriptor describes a node served by the component componentJID,
// with pingd reachable at publicURL. Its Ref is the resource the node
// follows, when it follows one and the node is open: the descriptor of a
// whitelist node is public, its source is for members.
func NewDescriptor(publicURL, componentJID string, n *hub.Node) (Descriptor, error) {
	links, err := nodeurl.NodeLinks(publicURL, n.Name)
	if err != nil {
		return Descriptor{}, err
	}
	d := Descriptor{
		DescriptorURL: links.Descriptor,
		ComponentJID:  componentJID,
		Node:          n.Name,
		Security:      Security(n.AccessModel),
	}
	if n.AccessModel != hub.AccessWhitelist {
		d.Ref = n.SourceURL
	}
	return d, nil
}
