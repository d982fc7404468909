import {
  InvalidArgumentError,
  optionalPauseReason,
  requireStoredType,
  type CommandStore,
  type TypePauseStore,
  UnknownCommandTypeError,
} from '@asynccmd/core';

/** A paused type as /types/paused, /stats, `asynccmd paused` and the dashboard show it. */
export interface PausedTypeView {
  readonly type: string;
  /** When it was paused, on the database clock. */
  readonly pausedAt: string;
  readonly reason: string | null;
}

/** The answer of a pause or a resume: the type's state now, and whether this call changed it. */
export interface TypePauseChange {
  readonly type: string;
  readonly paused: boolean;
  /** false: it was paused (or not paused) already, and stays as it was. */
  readonly changed: boolean;
}

export function typePausesOf(store: CommandStore): TypePauseStore {
  if (store.typePauses === undefined) {
    throw new InvalidArgumentError(`the ${store.dialect} store keeps no type pauses`);
  }
  return store.typePauses;
}

/** The paused types, by name; none when the store keeps no pauses. */
export async function readPausedTypes(store: CommandStore): Promise<PausedTypeView[]> {
  if (store.typePauses === undefined) return [];
  return (await store.typePauses.list()).map((p) => ({
    type: p.type,
    pausedAt: p.pausedAt.toISOString(),
    reason: p.reason,
  }));
}

/**
 * A pause's reason as operators give it: absent, or text. An empty one is refused like an empty
 * kill reason: it would read as a reason given.
 */
export function parsePauseReason(input: unknown): string | null {
  if (input === '') throw new InvalidArgumentError('a pause reason must not be empty');
  return optionalPauseReason(input);
}

/**
 * Pauses or resumes `type` for every instance: the PENDING commands of a paused type wait, those
 * already claimed finish. Input is checked here too, so that a store of someone else's that
 * forgets to check it still gets only what the port allows.
 */
export async function setTypePaused(
  store: CommandStore,
  type: unknown,
  paused: boolean,
  reason?: unknown,
  knownTypes: readonly string[] | null = null,
): Promise<TypePauseChange> {
  const name = requireStoredType('a type pause', type);
  // A pause of a type nothing here executes or submits is most likely a typo that would sit in
  // the paused list pausing nothing; a resume is always taken, so such a pause can be lifted.
  if (paused) requireKnownType(name, knownTypes);
  if (!paused && reason !== undefined) throw new InvalidArgumentError('resume takes no reason');
  const why = parsePauseReason(reason);
  const pauses = typePausesOf(store);
  const changed = paused ? await pauses.pause(name, why) : await pauses.resume(name);
  return { type: name, paused, changed };
}

/** UNKNOWN_COMMAND_TYPE for a type outside `knownTypes`; null: any type (the caller cannot know them). */
export function requireKnownType(type: string, knownTypes: readonly string[] | null): void {
  if (knownTypes !== null && !knownTypes.includes(type)) throw new UnknownCommandTypeError(type, knownTypes);
}
