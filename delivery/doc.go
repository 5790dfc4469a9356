// Package delivery sends pingd's outbound HTTP notifications durably.
package delivery
