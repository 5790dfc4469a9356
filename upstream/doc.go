// Package upstream is pingd as a subscriber of other push services: when a
// source advertises its own WebSub hub or rssCloud cloud, pingd subscribes
// there, so the source's changes come to pingd instead of being polled for.
//
// It is a room of its own because it is the mirror image of delivery:
// delivery sends pingd's changes to its subscribers; upstream receives
// other hubs' changes as one of their subscribers, with its own callbacks,
// leases, renewals and verification answers.
//
// Its parts:
//   - Tracker wraps the feed scheduler the hub asks after every fetch. It
//     notes the hubs and clouds a fetch advertises (rel="hub" and
//     rel="self" in the answer's Link header, hub.FetchResult.Links, which
//     win; then the feed channel's atom:link rel="hub" and rel="self", and
//     <cloud>), and while a push is active for a source it moves the next
//     poll out to a rare safety net (Config.SafetyPoll), so a lost push
//     delays a change, never loses it.
//   - Manager acts on that: for a source with subscribers it subscribes at
//     the WebSub hub (hub.mode=subscribe with a callback per subscription,
//     a lease and a secret of its own) or registers with the cloud in the
//     protocol its <cloud> names (cloud.go: pleaseNotify over http-post, a
//     call of its registerProcedure over XML-RPC or SOAP 1.1), asking to
//     be notified in the same protocol and naming pingd's public host as
//     domain so the cloud checks pingd with a challenge; it renews a
//     WebSub lease at 80 % of its length and re-registers with a cloud
//     every 24 hours; when the source has no subscriber left it
//     unsubscribes at the hub (a cloud registration just lapses). Only the
//     process that leads (Config.Leading) sends these requests. Failures
//     are retried after an hour. A hub or cloud that is pingd itself
//     (internal/nodeurl's IsOwnEndpoint against Config.PublicURL, in any
//     spelling) is never subscribed to: a publisher using pingd as its
//     hub reaches it directly, and every publish would come back as a
//     push.
//   - Handler serves the callbacks: /upstream/websub/{id} answers the hub's
//     verification of intent for the subscription it knows and takes content
//     distributions signed with its secret (X-Hub-Signature, checked by
//     internal/websub); unsigned or wrongly signed ones are answered 2xx
//     and ignored, as WebSub §8 says;
//     /upstream/rsscloud/{id} answers the cloud's challenge and takes its
//     notifications (an http-post form, or a call of NotifyProcedure over
//     XML-RPC or SOAP, answered true) for the registered URL only; they
//     are not signed: beyond Config.NotifyRate per
//     callback they are answered 429 with Retry-After and ping nothing (a
//     notification let through fetches the feed, so refusing a flood loses
//     no change). A push enters as a ping of the source: pingd fetches it
//     (conditionally) and the one rule of "what is new" decides what
//     subscribers get.
//
// The protocols' names are internal/websub's and internal/rsscloud's. It
// talks to the hub and its store (hub.UpstreamStore) only; it never
// touches the XMPP side or other packages' HTTP routes, and its outbound
// requests go through the SSRF-guarded client it is given, by way of
// internal/httpout as delivery's do; a cloud's answer is judged by
// rsscloud.CheckAnswer, the rule delivery judges notifications by.
package upstream
