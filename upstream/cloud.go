package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/httpout"
	"github.com/pingd/pingd/internal/rsscloud"
	"github.com/pingd/pingd/internal/soap"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// NotifyProcedure is the procedure pingd asks an xml-rpc or soap cloud to
// call on its callback: rssCloud.notify(url).
const NotifyProcedure = "rssCloud.notify"

// cloud is where and how pingd registers with an rssCloud cloud.
type cloud struct {
	// url is the cloud's responder, http://domain:port/path.
	url       string
	protocol  string
	procedure string
}

// endpoint is how a cloud is stored (hub.Upstream.Endpoint): the
// responder's URL, with the protocol and registerProcedure in the
// fragment for xml-rpc and soap (a fragment is never sent). An http-post
// cloud is its URL alone, as registrations made before other protocols
// were stored.
func (c cloud) endpoint() string {
	if c.protocol == rsscloud.HTTPPost {
		return c.url
	}
	return c.url + "#" + url.Values{"protocol": {c.protocol}, "procedure": {c.procedure}}.Encode()
}

// parseCloud reads an endpoint back.
func parseCloud(endpoint string) cloud {
	u, frag, ok := strings.Cut(endpoint, "#")
	if !ok {
		return cloud{url: endpoint, protocol: rsscloud.HTTPPost}
	}
	v, _ := url.ParseQuery(frag)
	return cloud{url: u, protocol: v.Get("protocol"), procedure: v.Get("procedure")}
}

// cloudEndpoint is the stored endpoint of a <cloud> element, "" for one
// pingd cannot register with (another protocol, or an xml-rpc or soap
// cloud whose registerProcedure cannot be called).
func cloudEndpoint(c discovery.FoundCloud) string {
	path := c.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	cl := cloud{
		url:       (&url.URL{Scheme: "http", Host: net.JoinHostPort(c.Domain, strconv.Itoa(c.Port)), Path: path}).String(),
		protocol:  c.Protocol,
		procedure: c.RegisterProcedure,
	}
	switch c.Protocol {
	case rsscloud.HTTPPost:
	case rsscloud.XMLRPC:
		if !xmlrpc.ValidMethodName(c.RegisterProcedure) {
			return ""
		}
	case rsscloud.SOAP:
		if !rsscloud.ValidSOAPProcedure(c.RegisterProcedure) {
			return ""
		}
	default:
		return ""
	}
	return cl.endpoint()
}

// pleaseNotify registers u's topic with its cloud in the cloud's
// protocol, asking to be notified in the same one at u's callback, and
// naming pingd's public host as domain so that the cloud checks the
// registration with a challenge to pingd rather than a test notification
// to the requesting address.
func (m *Manager) pleaseNotify(ctx context.Context, u *hub.Upstream) error {
	c := parseCloud(u.Endpoint)
	port := m.base.Port()
	if port == "" {
		port = "80"
		if m.base.Scheme == "https" {
			port = "443"
		}
	}
	cb, _ := url.Parse(m.callback(u))
	reg := registration{port: port, path: cb.EscapedPath(), domain: m.base.Hostname(), topic: u.Topic}
	switch c.protocol {
	case rsscloud.HTTPPost:
		return m.pleaseNotifyREST(ctx, c, reg)
	case rsscloud.XMLRPC:
		return m.pleaseNotifyXMLRPC(ctx, c, reg)
	case rsscloud.SOAP:
		return m.pleaseNotifySOAP(ctx, c, reg)
	}
	return fmt.Errorf("rssCloud protocol %q is not one pingd registers with", c.protocol)
}

// registration is what pingd asks a cloud for.
type registration struct {
	port, path, domain, topic string
}

// pleaseNotifyREST is the REST form (rssCloud's http-post interface).
func (m *Manager) pleaseNotifyREST(ctx context.Context, c cloud, reg registration) error {
	form := url.Values{
		"notifyProcedure": {""},
		"port":            {reg.port},
		"path":            {reg.path},
		"protocol":        {rsscloud.HTTPPost},
		"domain":          {reg.domain},
		"url1":            {reg.topic},
	}
	return m.askCloud(ctx, c, "application/x-www-form-urlencoded", []byte(form.Encode()), nil)
}

// pleaseNotifyXMLRPC calls the cloud's registerProcedure with
// (notifyProcedure, port, path, protocol, urlList, domain). A cloud that
// answers that six-parameter form with a fault is asked again in seed
// 001's original five-parameter form, which has no domain: such a cloud
// notifies the address the request came from.
func (m *Manager) pleaseNotifyXMLRPC(ctx context.Context, c cloud, reg registration) error {
	port, err := strconv.Atoi(reg.port)
	if err != nil {
		return fmt.Errorf("public URL port %q: %w", reg.port, err)
	}
	params := []any{NotifyProcedure, port, reg.path, rsscloud.XMLRPC, []any{reg.topic}, reg.domain}
	err = m.callXMLRPC(ctx, c, params)
	var fault *xmlrpc.Fault
	if errors.As(err, &fault) {
		if err5 := m.callXMLRPC(ctx, c, params[:5]); err5 != nil {
			return fmt.Errorf("%w; without domain: %w", err, err5)
		}
		return nil
	}
	return err
}

func (m *Manager) callXMLRPC(ctx context.Context, c cloud, params []any) error {
	call, err := xmlrpc.MarshalCall(c.procedure, params...)
	if err != nil {
		return err
	}
	return m.askCloud(ctx, c, "text/xml", call, nil)
}

// pleaseNotifySOAP calls the cloud's registerProcedure over SOAP 1.1 with
// the parameters of the XML-RPC form, named as rssCloud's SOAP clients
// name them.
func (m *Manager) pleaseNotifySOAP(ctx context.Context, c cloud, reg registration) error {
	port, err := strconv.Atoi(reg.port)
	if err != nil {
		return fmt.Errorf("public URL port %q: %w", reg.port, err)
	}
	call, err := soap.MarshalCall(c.procedure,
		soap.Param{Name: "notifyProcedure", Value: NotifyProcedure},
		soap.Param{Name: "port", Value: port},
		soap.Param{Name: "path", Value: reg.path},
		soap.Param{Name: "protocol", Value: rsscloud.SOAP},
		soap.Param{Name: "urlList", Value: []string{reg.topic}},
		soap.Param{Name: "domain", Value: reg.domain})
	if err != nil {
		return err
	}
	return m.askCloud(ctx, c, soap.ContentType, call, http.Header{"Soapaction": {soap.Action(c.procedure)}})
}

// askCloud posts a pleaseNotify to the cloud and judges the answer by
// rssCloud's rule (rsscloud.CheckAnswer).
func (m *Manager) askCloud(ctx context.Context, c cloud, contentType string, body []byte, header http.Header) error {
	status, answer, err := m.send(ctx, c.url, contentType, body, header)
	if err != nil {
		return err
	}
	if err := rsscloud.CheckAnswer(rsscloud.PleaseNotify, c.protocol, status, []byte(answer)); err != nil {
		if c.procedure != "" {
			return fmt.Errorf("the cloud's answer to %s: %w", c.procedure, err)
		}
		return fmt.Errorf("the cloud's answer: %w", err)
	}
	return nil
}

// send posts body and returns the status and the start of the answer
// (internal/httpout: the User-Agent, the cap, URLs redacted in errors, a
// cut answer an error).
func (m *Manager) send(ctx context.Context, endpoint, contentType string, body []byte, header http.Header) (int, string, error) {
	resp, err := httpout.Do(ctx, m.cfg.HTTP, m.cfg.UserAgent, maxAnswerBytes,
		httpout.Request{Method: http.MethodPost, URL: endpoint, ContentType: contentType, Body: body, Header: header})
	return resp.Status, string(resp.Body), err
}
