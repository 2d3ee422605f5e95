// The storage operations of every aggregate over one connection, for both engines' index.ts.
import { statementName } from '../../operations/statements.js';
import type { StorageOperations } from '../port.js';

/** An aggregate class: its operations over one connection, and which of them write. */
export interface AggregateClass<C> {
  new (connection: C): object;
  readonly name: string;
  /** Operations that write: called on the storage itself, each runs as its own transaction. */
  readonly writes: readonly string[];
}

/** The operations that write, of every aggregate. */
export function writesOf<C>(aggregates: readonly AggregateClass<C>[]): ReadonlySet<string> {
  return new Set(aggregates.flatMap((aggregate) => aggregate.writes));
}

/** The methods of an aggregate class, its own and those it inherits (an engine's subclass of one written once). */
function methodsOf(Aggregate: { prototype: object }): string[] {
  const names = new Set<string>();
  for (let proto = Aggregate.prototype; proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== 'constructor' && typeof Object.getOwnPropertyDescriptor(proto, name)?.value === 'function') names.add(name);
    }
  }
  return [...names];
}

/** Every aggregate's operations over one connection, as one object. */
export function operationsOn<C extends { named(name: string): C }>(
  aggregates: readonly AggregateClass<C>[],
  connection: C,
): StorageOperations {
  const operations: Record<string, unknown> = {};
  for (const Aggregate of aggregates) {
    for (const name of methodsOf(Aggregate)) {
      // Each operation on an aggregate of its own (they hold nothing but their connection), whose
      // statements carry the operation's name in the statement metrics (`images.claimDueImageMirrors`).
      // Private helpers are methods too; they are never called from outside.
      const aggregate = new Aggregate(connection.named(statementName(Aggregate.name, name))) as Record<
        string,
        (...args: unknown[]) => unknown
      >;
      operations[name] = aggregate[name]!.bind(aggregate);
    }
  }
  return operations as unknown as StorageOperations;
}
