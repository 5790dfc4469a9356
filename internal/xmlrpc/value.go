package xmlrpc

import (
	"errors"
	"fmt"
)

// Fault codes of the "specification for fault code interoperability",
// which most XML-RPC servers follow.
const (
	FaultParse             = -32700 // not well-formed
	FaultUnsupportedCoding = -32701 // unsupported encoding
	FaultInvalidRequest    = -32600 // not a valid XML-RPC request
	FaultMethodNotFound    = -32601 // requested method not found
	FaultInvalidParams     = -32602 // invalid method parameters
	FaultInternal          = -32603 // internal XML-RPC error
	FaultApplication       = -32500 // application error
)

// Fault is an XML-RPC fault. A decoded fault response is returned as a
// *Fault error; a method may return one to choose its fault code.
type Fault struct {
	Code    int
	Message string
}

func (f *Fault) Error() string { return fmt.Sprintf("xml-rpc fault %d: %s", f.Code, f.Message) }

// Errorf returns a fault with a formatted message.
func Errorf(code int, format string, args ...any) *Fault {
	return &Fault{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Call is a decoded <methodCall>.
type Call struct {
	Method string
	Params []any
}

// Errors the decoder wraps; test them with errors.Is.
var (
	// ErrMalformed marks a document that is not well-formed XML or not a
	// valid XML-RPC document.
	ErrMalformed = errors.New("malformed XML-RPC")
	// ErrTooLarge marks a document beyond Limits.MaxBytes.
	ErrTooLarge = errors.New("XML-RPC document too large")
	// ErrLimit marks a document beyond the depth or value-count limits.
	ErrLimit = errors.New("XML-RPC document exceeds a limit")
)

// Limits bound what the decoder accepts; zero fields take the defaults.
type Limits struct {
	// MaxBytes is the largest document, default 1 MiB.
	MaxBytes int64
	// MaxDepth is the deepest nesting of arrays and structs, default 32.
	MaxDepth int
	// MaxValues is the largest number of <value> elements, default 10000.
	MaxValues int
}

// Default limits.
const (
	DefaultMaxBytes  = 1 << 20
	DefaultMaxDepth  = 32
	DefaultMaxValues = 10000
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxValues <= 0 {
		l.MaxValues = DefaultMaxValues
	}
	return l
}

// ValidMethodName reports whether name uses only the characters the
// specification allows in a methodName: letters, digits, '_', '.', ':' and '/'.
func ValidMethodName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '_', r == '.', r == ':', r == '/':
		default:
			return false
		}
	}
	return true
}
