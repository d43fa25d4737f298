package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/uptrace/bun"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/internal/telemetry"
)

// TraceQueries traces the database's statements (see traceHook): every handle of it — writes, transactions and
// reads — reports to the process's tracer, which exports nothing unless tracing is configured.
func (db *DB) TraceQueries() {
	system := "postgresql"
	if db.Dialect() == SQLite {
		system = "sqlite"
	}
	db.AddQueryHook(traceHook{system: system})
}

// traceHook makes a client span of each statement run inside a traced operation (statements of untraced background
// polls make none), and a "transaction" span from BEGIN to COMMIT or ROLLBACK whose children are the transaction's
// statements. A span names the statement's operation (SELECT, INSERT, …) and the database system, never its text
// or arguments.
type traceHook struct {
	// system is db.system.name: "sqlite" or "postgresql".
	system string
}

// txSpan holds the transaction span in the context Bun keeps for the transaction (the one BEGIN's hook returned),
// so that COMMIT or ROLLBACK can end it.
type txSpan struct{}

// BeforeQuery implements bun.QueryHook.
func (h traceHook) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	op := e.Operation()
	attrs := []attribute.KeyValue{attribute.String("db.system.name", h.system)}
	if e.Query == "BEGIN" {
		ctx, span := telemetry.Start(ctx, "transaction", trace.SpanKindInternal, attrs...)
		return context.WithValue(ctx, txSpan{}, span)
	}
	ctx, _ = telemetry.Start(ctx, op, trace.SpanKindClient, append(attrs, attribute.String("db.operation.name", op))...)
	return ctx
}

// AfterQuery implements bun.QueryHook.
func (h traceHook) AfterQuery(ctx context.Context, e *bun.QueryEvent) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if e.Err != nil && !errors.Is(e.Err, sql.ErrNoRows) {
		span.SetStatus(codes.Error, "") // a driver's message can quote values
	}
	if e.Query == "BEGIN" {
		if e.Err != nil {
			span.End()
		}
		return // the transaction span lasts until COMMIT or ROLLBACK
	}
	span.End()
	if e.Query == "COMMIT" || e.Query == "ROLLBACK" {
		if tx, ok := ctx.Value(txSpan{}).(trace.Span); ok {
			if e.Query == "ROLLBACK" {
				tx.SetAttributes(attribute.Bool("db.rolled_back", true))
			}
			tx.End()
		}
	}
}
