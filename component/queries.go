package component

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// pendingQueries are the IQs the component sent and waits answers for.
type pendingQueries struct {
	mu     sync.Mutex
	next   uint64
	m      map[string]pendingQuery
	closed bool
}

type pendingQuery struct {
	to     string
	answer chan *element
}

func newPendingQueries() *pendingQueries {
	return &pendingQueries{m: map[string]pendingQuery{}}
}

// add registers a query to `to` and returns its id and answer channel;
// ok is false once the connection is gone.
func (q *pendingQueries) add(to string) (id string, answer chan *element, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return "", nil, false
	}
	q.next++
	id = "pingd-" + strconv.FormatUint(q.next, 10) + "-" + hub.RandomID()[:8]
	answer = make(chan *element, 1)
	q.m[id] = pendingQuery{to: to, answer: answer}
	return id, answer, true
}

// deliver hands an IQ result or error to the query it answers, if it
// answers one (same id, from the address asked).
func (q *pendingQueries) deliver(iq *element) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.m[iq.attr("id")]
	if !ok {
		return
	}
	from, err := jid.Parse(iq.attr("from"))
	if err != nil || from.String() != p.to {
		return
	}
	delete(q.m, iq.attr("id"))
	p.answer <- iq
}

func (q *pendingQueries) forget(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.m, id)
}

// closeAll ends every wait: the connection is gone.
func (q *pendingQueries) closeAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for id, p := range q.m {
		close(p.answer)
		delete(q.m, id)
	}
}

// errQueryFailed is an error answer to one of pingd's own queries.
var errQueryFailed = errors.New("the XMPP server answered with an error")

// query sends an IQ get with payload to `to` and waits for the result.
func (d *dispatcher) query(ctx context.Context, cn *connection, to, payload string) (*element, error) {
	tj, err := jid.Parse(to)
	if err != nil {
		return nil, err
	}
	to = tj.String()
	id, answer, ok := cn.queries.add(to)
	if !ok {
		return nil, errConnectionLost
	}
	defer cn.queries.forget(id)
	var b xmlBuf
	b.open("iq", "type", "get", "id", id, "from", d.domainStr, "to", to)
	b.WriteString(payload)
	b.close("iq")
	if err := cn.write(func(w *bufio.Writer) error {
		_, err := w.Write(b.Bytes())
		return err
	}); err != nil {
		return nil, err
	}
	t := time.NewTimer(queryTimeout)
	defer t.Stop()
	select {
	case iq, ok := <-answer:
		if !ok {
			return nil, errConnectionLost
		}
		if iq.attr("type") != "result" {
			return nil, fmt.Errorf("%w: %s", errQueryFailed, errorText(iq))
		}
		return iq, nil
	case <-t.C:
		return nil, fmt.Errorf("no answer from %s within %s", to, queryTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
