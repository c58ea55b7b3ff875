package provider

import "regexp"

// ListPrices are list prices in US dollars per million tokens (standard
// tier, prompts under 200K tokens) for the default models and their close
// relatives, as the providers' pricing pages listed them in 2026. They are
// used when a profile sets no pricing; a profile's pricing: block replaces
// them. Anthropic's CacheWritePerMTok is the 5-minute cache write (1.25×
// input); OpenAI and Gemini charge nothing extra to write their automatic
// caches.
var ListPrices = map[string]Pricing{
	"gpt-5.4-mini":      {InputPerMTok: 0.75, CachedInputPerMTok: 0.075, OutputPerMTok: 4.50},
	"gpt-5.4":           {InputPerMTok: 2.50, CachedInputPerMTok: 0.25, OutputPerMTok: 15},
	"gpt-5.5":           {InputPerMTok: 5, CachedInputPerMTok: 0.50, OutputPerMTok: 30},
	"claude-sonnet-4-6": {InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75, OutputPerMTok: 15},
	"claude-haiku-4-5":  {InputPerMTok: 1, CachedInputPerMTok: 0.10, CacheWritePerMTok: 1.25, OutputPerMTok: 5},
	"gemini-2.5-flash":  {InputPerMTok: 0.30, CachedInputPerMTok: 0.03, OutputPerMTok: 2.50},
}

// snapshotSuffix is a dated snapshot's suffix: gpt-5.4-mini-2026-03-17,
// claude-haiku-4-5-20251001.
var snapshotSuffix = regexp.MustCompile(`^-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// ListPrice returns the list price of model, or of the model a dated
// snapshot belongs to.
func ListPrice(model string) (Pricing, bool) {
	if p, ok := ListPrices[model]; ok {
		return p, true
	}
	for name, p := range ListPrices {
		if len(model) > len(name) && model[:len(name)] == name && snapshotSuffix.MatchString(model[len(name):]) {
			return p, true
		}
	}
	return Pricing{}, false
}

// PricingFor is the pricing a run with profile p uses: the profile's own,
// else the list price of its model, else none (cost 0, which the run's
// max_cost_usd cannot limit: the start-up line says so).
func PricingFor(p Profile) Pricing {
	if !p.Pricing.IsZero() {
		return p.Pricing
	}
	lp, _ := ListPrice(p.Model)
	return lp
}
