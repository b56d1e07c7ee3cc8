// Package stream is the in-process fan-out the classroom's live views use:
// a Broker publishes values to any number of subscribers, each with its own
// bounded buffer. Publishing never blocks; a subscriber whose buffer is full
// misses the value (it is counted, so the subscriber can tell it fell behind
// and reload a snapshot). A slow or vanished browser therefore never holds
// up the lab manager, the board or the other viewers.
package stream
