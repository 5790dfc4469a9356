package feed

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mmcdole/gofeed"
	"github.com/mmcdole/gofeed/rss"

	"github.com/pingd/pingd/hub"
)

// rssHints reads ttl, skipHours and skipDays.
func rssHints(f *rss.Feed) hub.PollHints {
	var h hub.PollHints
	if n, err := strconv.Atoi(strings.TrimSpace(f.TTL)); err == nil && n > 0 {
		h.TTL = time.Duration(min(n, 60*24*365)) * time.Minute
	}
	for _, s := range f.SkipHours {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > 24 {
			continue
		}
		n %= 24 // some feeds write 24 for midnight
		if !slices.Contains(h.SkipHours, n) {
			h.SkipHours = append(h.SkipHours, n)
		}
	}
	slices.Sort(h.SkipHours)
	for _, s := range f.SkipDays {
		if d, ok := parseWeekday(s); ok && !slices.Contains(h.SkipDays, d) {
			h.SkipDays = append(h.SkipDays, d)
		}
	}
	slices.Sort(h.SkipDays)
	return h
}

func parseWeekday(s string) (time.Weekday, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) < 3 {
		return 0, false
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		name := strings.ToLower(d.String())
		if s == name || s == name[:3] {
			return d, true
		}
	}
	return 0, false
}

// syPeriods are the sy:updatePeriod values of the RSS 1.0 Syndication module.
var syPeriods = map[string]time.Duration{
	"hourly":  time.Hour,
	"daily":   24 * time.Hour,
	"weekly":  7 * 24 * time.Hour,
	"monthly": 30 * 24 * time.Hour,
	"yearly":  365 * 24 * time.Hour,
}

// syHints reads sy:updatePeriod, sy:updateFrequency and sy:updateBase,
// which RSS 1.0, RSS 2.0 and Atom documents may all carry.
func syHints(h *hub.PollHints, f *gofeed.Feed) {
	sy := f.Extensions["sy"]
	if sy == nil {
		return
	}
	first := func(name string) string {
		if v := sy[name]; len(v) > 0 {
			return strings.TrimSpace(v[0].Value)
		}
		return ""
	}
	period := strings.ToLower(first("updatePeriod"))
	if _, ok := syPeriods[period]; !ok {
		return
	}
	h.UpdatePeriod = period
	h.UpdateFrequency = 1
	if n, err := strconv.Atoi(first("updateFrequency")); err == nil && n > 0 {
		h.UpdateFrequency = min(n, 10000)
	}
	if t, ok := parseW3CDTF(first("updateBase")); ok {
		h.UpdateBase = t
	}
}

// parseW3CDTF parses the date profile sy:updateBase uses.
func parseW3CDTF(s string) (time.Time, bool) {
	for _, layout := range []string{
		time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02", "2006-01", "2006",
	} {
		if t, err := time.Parse(layout, s); err == nil && validTime(t) {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// SyInterval is the interval a sy:updatePeriod and sy:updateFrequency pair
// describe (period divided by frequency), or 0.
func SyInterval(h hub.PollHints) time.Duration {
	p, ok := syPeriods[h.UpdatePeriod]
	if !ok {
		return 0
	}
	return p / time.Duration(max(h.UpdateFrequency, 1))
}
