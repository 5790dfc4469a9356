package weblogs

import "time"

// The hourly archives (seed 003: weblogs.com archived the pings of each
// hour, and "all pings received in the first hour of January 1st 2007
// would be archived in …/2007/01/01/01.xml"): the hours of a UTC day are
// numbered as the seed numbers them, 01 to 24, HH.xml holding the pings
// received from HH-1 o'clock to HH o'clock UTC.

// ArchiveHour returns the UTC hour that /year/month/day/hour.xml names
// (hour 1 to 24: the hour ending at that o'clock), and false when there is
// no such hour.
func ArchiveHour(year, month, day, hour int) (time.Time, bool) {
	date := time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC)
	if date.Year() != year || int(date.Month()) != month || date.Day() != day || hour < 1 || hour > 24 {
		return time.Time{}, false
	}
	return date.Add(time.Duration(hour-1) * time.Hour), true
}
