package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/agentos/agentos/runtime/buildinfo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otelTracing starts the OpenTelemetry trace pipeline when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (the OTLP/HTTP exporter reads it and
// the other OTEL_EXPORTER_OTLP_* variables itself); otherwise it returns a
// nil observer and tracing is off. shutdown flushes the spans.
func otelTracing(ctx context.Context, getenv func(string) string, log *slog.Logger) (*tracing.Observer, func(context.Context) error, error) {
	// The endpoint as the OTLP exporter specification reads it: the
	// signal's own URL, or the base URL plus /v1/traces.
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		if base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			endpoint = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	if endpoint == "" {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, nil, fmt.Errorf("OpenTelemetry exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "agentos"), attribute.String("service.version", buildinfo.Version()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithIDGenerator(tracing.IDGenerator{}))
	log.Info("OpenTelemetry traces on: one trace per run, exported over OTLP/HTTP")
	return tracing.NewObserver(tp.Tracer("github.com/agentos/agentos")), tp.Shutdown, nil
}

// tracedStore is the server's store with every appended event also made
// into spans.
type tracedStore struct {
	store.Store
	o *tracing.Observer
}

// Append implements store.Store.
func (t tracedStore) Append(ctx context.Context, sessionID string, expectedSeq int64, drafts ...event.Draft) ([]event.Event, error) {
	out, err := t.Store.Append(ctx, sessionID, expectedSeq, drafts...)
	if len(out) > 0 {
		t.o.Observe(out)
	}
	return out, err
}
