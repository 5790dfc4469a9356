package hub

import "context"

// A WaitObserver learns when a call blocks on something slower than the
// store: the baseline fetch of a source (FetchEngine.AwaitFetch), which takes
// as long as the source's server does, up to the engine's BaselineWait. It is called when
// the wait starts and returns the function to call when it ends. A caller
// serving requests from a fixed pool of workers uses it to let another
// worker run meanwhile, so that requests naming slow sources cannot stall
// every other request. Like net/http/httptrace, it travels in the context:
// it concerns how a request is carried out, not what it asks. It is told of
// every such wait, however short it turns out; ended may be nil.
type WaitObserver func() (ended func())

type waitObserverKey struct{}

// WithWaitObserver returns a context whose slow waits are reported to o.
func WithWaitObserver(ctx context.Context, o WaitObserver) context.Context {
	return context.WithValue(ctx, waitObserverKey{}, o)
}

// StartSlowWait tells the context's observer, if any, that the caller
// starts a slow wait, and returns the function that tells it the wait
// ended. The hub calls it; so may anything else that blocks as long on
// behalf of a request.
func StartSlowWait(ctx context.Context) (ended func()) {
	o, _ := ctx.Value(waitObserverKey{}).(WaitObserver)
	if o == nil {
		return func() {}
	}
	if ended = o(); ended == nil {
		return func() {}
	}
	return ended
}
