package openai

import "time"

// SetProbeTimeout shortens DiscoverWindow's wait for each answer, for the
// test of a server that never answers.
func SetProbeTimeout(p *Provider, d time.Duration) { p.probeTimeout = d }
