/**
 * Whom the control API acts on: a person (by generator and id, as their tokens name them) or an API user. As a
 * string, a subject is what Redis stores a revocation under and what control messages carry:
 * `person:<generator>:<id>` or `apiUser:<name>` (a generator's name holds no ":", a person's id may).
 */
import { personKeyOf } from '../auth/authenticator.ts';

export type Subject = { kind: 'person'; generator: string; id: string; key: string } | { kind: 'apiUser'; name: string };

export function personSubject(generator: string, id: string): Subject {
  return { kind: 'person', generator, id, key: personKeyOf(generator, id) };
}

export function subjectText(subject: Subject): string {
  return subject.kind === 'person' ? `person:${subject.key}` : `apiUser:${subject.name}`;
}

/** The subject a string names; undefined for anything else. */
export function subjectOf(text: string): Subject | undefined {
  if (text.startsWith('apiUser:')) {
    const name = text.slice('apiUser:'.length);
    return name === '' ? undefined : { kind: 'apiUser', name };
  }
  if (!text.startsWith('person:')) return undefined;
  const key = text.slice('person:'.length);
  const colon = key.indexOf(':');
  return colon <= 0 ? undefined : personSubject(key.slice(0, colon), key.slice(colon + 1));
}

/** How a subject is written in a log line or an answer. */
export function describe(subject: Subject): string {
  return subject.kind === 'person' ? `person ${subject.key}` : `API user ${subject.name}`;
}
