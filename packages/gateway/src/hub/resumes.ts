/**
 * Sessions between joining a subscription of an event with history and the end of their REGISTER reply. Their
 * NOTIFICATIONs of it are held meanwhile, so that the client reads, in this order: the reply (whose `offset` is the
 * route's position as of its registration), the notifications after its `since` (replayed from the history), those
 * held meanwhile, then the live ones. A frame at or below what the reply and replay covered is never written.
 * Kept here, off Session: only a session in the middle of such a REGISTER has one.
 */
import type { Position } from '@herald/protocol';
import type { Session, Subscription } from './session.ts';

interface Resume {
  /** Frames held, with their positions; undefined once the reply and replay are written. */
  held: Array<[Position, Buffer]> | undefined;
  heldBytes: number;
  /** What the reply and the replay covered; undefined while not known (or the route's position is unknown). */
  floor: Position | undefined;
  /** The replay, once read. */
  replay: Buffer[] | undefined;
  replied: boolean;
}

export interface ResumeHost {
  /** Write a frame to the session as any NOTIFICATION is written (the slow-client bound, coalesced writes). */
  write(session: Session, frame: Buffer): void;
  /** The frames held for a session passed its bound on unsent data (websocket.maxBufferedBytes). */
  overflow(session: Session): void;
  /** A frame the reply or the replay covered already. */
  duplicate(): void;
  readonly maxBufferedBytes: number;
}

/** Whether `position` is at or below `floor`, in its epoch. */
const covered = (position: Position, floor: Position | undefined): boolean =>
  floor !== undefined && position.epoch === floor.epoch && position.offset <= floor.offset;

export class Resumes {
  readonly #sessions = new Map<Session, Map<Subscription, Resume>>();
  readonly #host: ResumeHost;

  constructor(host: ResumeHost) {
    this.#host = host;
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** The session joined `subscription`: its frames are held until its reply and replay are written. */
  hold(session: Session, subscription: Subscription): void {
    let resumes = this.#sessions.get(session);
    if (!resumes) this.#sessions.set(session, (resumes = new Map()));
    resumes.set(subscription, { held: [], heldBytes: 0, floor: undefined, replay: undefined, replied: false });
  }

  /** Answers whether the frame was taken care of here (held, or covered already); false: write it. */
  offer(session: Session, subscription: Subscription, frame: Buffer, position: Position): boolean {
    const resume = this.#sessions.get(session)?.get(subscription);
    if (resume === undefined) return false;
    if (resume.held !== undefined) {
      resume.held.push([position, frame]);
      resume.heldBytes += frame.length;
      if (resume.heldBytes + session.unsentBytes > this.#host.maxBufferedBytes) this.#host.overflow(session);
      return true;
    }
    if (covered(position, resume.floor)) {
      this.#host.duplicate();
      return true;
    }
    // Past what the reply covered: nothing more to filter.
    this.forget(session, subscription);
    return false;
  }

  /** The replay is read: it is written once the reply is (at once if that was first). */
  ready(session: Session, subscription: Subscription, replay: Buffer[], floor: Position | undefined): void {
    const resume = this.#sessions.get(session)?.get(subscription);
    if (resume === undefined) return;
    resume.replay = replay;
    resume.floor = floor;
    if (resume.replied) this.#flush(session, subscription, resume);
  }

  /** A reply was written to the session: what follows the replies of its REGISTERs is written now. */
  replied(session: Session): void {
    const resumes = this.#sessions.get(session);
    if (resumes === undefined) return;
    for (const [subscription, resume] of resumes) {
      if (resume.held === undefined || resume.replied) continue;
      resume.replied = true;
      if (resume.replay !== undefined) this.#flush(session, subscription, resume);
    }
  }

  /** The session left the subscription (or closed, without `subscription`). */
  forget(session: Session, subscription?: Subscription): void {
    const resumes = this.#sessions.get(session);
    if (subscription !== undefined) resumes?.delete(subscription);
    if (subscription === undefined || resumes?.size === 0) this.#sessions.delete(session);
  }

  #flush(session: Session, subscription: Subscription, resume: Resume): void {
    const { held = [], replay = [], floor } = resume;
    resume.held = undefined;
    resume.replay = undefined;
    for (const frame of replay) this.#host.write(session, frame);
    for (const [position, frame] of held) {
      if (covered(position, floor)) this.#host.duplicate();
      else this.#host.write(session, frame);
    }
    // Without a floor nothing is left to filter; with one, frames still on their way at or below it are dropped.
    if (floor === undefined) this.forget(session, subscription);
  }
}
