import {
  context,
  ROOT_CONTEXT,
  trace,
  TraceFlags,
  type Attributes,
  type AttributeValue,
  type Context,
  type ContextManager,
  type Exception,
  type Link,
  type Span,
  type SpanContext,
  type SpanKind,
  type SpanOptions,
  type SpanStatus,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';

/**
 * The smallest real tracer for tests (no SDK is installed): spans record what was done to them, and
 * an AsyncLocalStorage context manager makes `startActiveSpan` and `context.active()` work.
 */

export class AsyncLocalContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

export class RecordedSpan implements Span {
  readonly attributes: Record<string, AttributeValue | undefined> = {};
  readonly events: { name: string; attributes?: Attributes }[] = [];
  readonly exceptions: Exception[] = [];
  readonly links: Link[];
  status: SpanStatus = { code: 0 };
  ended = false;
  private readonly ctx: SpanContext;

  constructor(
    public name: string,
    readonly kind: SpanKind | undefined,
    readonly parent: SpanContext | undefined,
    options: SpanOptions,
  ) {
    this.ctx = {
      traceId: parent?.traceId ?? randomBytes(16).toString('hex'),
      spanId: randomBytes(8).toString('hex'),
      traceFlags: TraceFlags.SAMPLED,
    };
    this.links = [...(options.links ?? [])];
    Object.assign(this.attributes, options.attributes ?? {});
  }
  spanContext(): SpanContext {
    return this.ctx;
  }
  setAttribute(key: string, value: AttributeValue): this {
    this.attributes[key] = value;
    return this;
  }
  setAttributes(attributes: Attributes): this {
    Object.assign(this.attributes, attributes);
    return this;
  }
  addEvent(name: string, attributes?: Attributes): this {
    this.events.push({ name, ...(attributes ? { attributes } : {}) });
    return this;
  }
  addLink(link: Link): this {
    this.links.push(link);
    return this;
  }
  addLinks(links: Link[]): this {
    this.links.push(...links);
    return this;
  }
  setStatus(status: SpanStatus): this {
    this.status = status;
    return this;
  }
  updateName(name: string): this {
    this.name = name;
    return this;
  }
  end(): void {
    this.ended = true;
  }
  isRecording(): boolean {
    return !this.ended;
  }
  recordException(exception: Exception): void {
    this.exceptions.push(exception);
  }
}

export class RecordingTracer implements Tracer {
  readonly spans: RecordedSpan[] = [];

  startSpan(name: string, options: SpanOptions = {}, ctx: Context = context.active()): RecordedSpan {
    const parent = options.root ? undefined : trace.getSpanContext(ctx);
    const span = new RecordedSpan(name, options.kind, parent, options);
    this.spans.push(span);
    return span;
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    ctx: Context,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    a: SpanOptions | F,
    b?: Context | F,
    c?: F,
  ): ReturnType<F> {
    const options = typeof a === 'function' ? {} : a;
    const ctx = typeof b === 'object' ? b : context.active();
    const fn = (typeof a === 'function' ? a : typeof b === 'function' ? b : c) as F;
    const span = this.startSpan(name, options, ctx);
    return context.with(trace.setSpan(ctx, span), () => fn(span)) as ReturnType<F>;
  }
}
