import {
  isTerminalOperationState,
  requireWorkflowName,
  type CommandProgress,
  type CommandStatus,
  type OperationState,
} from '@asynccmd/core';
import { createCipheriv, createDecipheriv, createHmac, timingSafeEqual } from 'node:crypto';
import type { WorkflowProgress, WorkflowStatus } from '../workflow.js';
import {
  validateStatusSecret,
  type PublicStatusLinkOptions,
  type PublicStatusOptions,
} from './public-status.js';
import { parseMountPath } from './validation.js';

/**
 * The status resource of a workflow anyone may read, beside the command's (public-status.ts) and
 * with the same secret. A workflow id is the application's own text (an order number, say), so
 * its reference hides it: the id sealed with AES-256-GCM under a key made from the secret, its
 * nonce an HMAC of the id (the same workflow always has the same link, and no two differ in
 * nonce), all in base64url. Without the secret a reference can be neither read nor made; a
 * reference that was not made with it, or was altered, names nothing.
 */

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
// A workflow id is at most 128 characters (at most 512 bytes of UTF-8), sealed with its nonce and tag.
const REFERENCE = /^[A-Za-z0-9_-]{39,720}$/;

function keyOf(secret: string): Buffer {
  return createHmac('sha256', secret).update('asynccmd workflow status key').digest();
}

function nonceOf(id: string, secret: string): Buffer {
  return createHmac('sha256', secret)
    .update(`asynccmd workflow status nonce ${id}`)
    .digest()
    .subarray(0, NONCE_BYTES);
}

/** The opaque reference of workflow `id`. */
export function publicWorkflowStatusReference(id: string, options: PublicStatusOptions): string {
  const workflowId = requireWorkflowName('a workflow id', id);
  const secret = validateStatusSecret(options);
  const nonce = nonceOf(workflowId, secret);
  const cipher = createCipheriv('aes-256-gcm', keyOf(secret), nonce);
  const sealed = Buffer.concat([cipher.update(workflowId, 'utf8'), cipher.final()]);
  return Buffer.concat([nonce, sealed, cipher.getAuthTag()]).toString('base64url');
}

/**
 * The public status URI of workflow `id` to return in `Location` with a 202
 * (`<basePath>/status/workflows/<reference>`); the admin handler given the same secret serves it.
 */
export function publicWorkflowStatusPath(id: string, options: PublicStatusLinkOptions): string {
  const base = parseMountPath('basePath', options.basePath ?? '');
  return `${base}/status/workflows/${publicWorkflowStatusReference(id, options)}`;
}

/** The workflow a reference names, or null when it is not one made with this secret. */
export function resolvePublicWorkflowReference(reference: string, secret: string): string | null {
  if (!REFERENCE.test(reference)) return null;
  const bytes = Buffer.from(reference, 'base64url');
  // Only the one canonical spelling of a reference names its workflow.
  if (bytes.length < NONCE_BYTES + 1 + TAG_BYTES || bytes.toString('base64url') !== reference) return null;
  const nonce = bytes.subarray(0, NONCE_BYTES);
  const sealed = bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES);
  let id: string;
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyOf(secret), nonce);
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    id = new TextDecoder('utf-8', { fatal: true }).decode(
      Buffer.concat([decipher.update(sealed), decipher.final()]),
    );
  } catch {
    return null;
  }
  const expected = nonceOf(id, secret);
  return timingSafeEqual(nonce, expected) ? id : null;
}

/** One step of a workflow as anyone holding its link sees it. */
export interface PublicWorkflowStep {
  readonly name: string;
  readonly type: string;
  readonly status: CommandStatus;
  /** accepted | processing | completed | follow_up_failed | cancelled */
  readonly operation: OperationState;
  readonly terminal: boolean;
  /** What its executor last reported with `ctx.progress`; null when nothing. */
  readonly progress: CommandProgress | null;
  /** The steps of the workflow it waits for, by name (a command outside the workflow is not named). */
  readonly dependsOn: readonly string[];
  /** With `publicStatus.result` only: the step's result once SUCCESS, null before and when none. */
  readonly result?: unknown;
}

/**
 * A workflow as anyone holding its link sees it: where it and each of its steps stand, never why
 * a step failed, nor the workflow's id, the steps' command ids or payloads; results only where
 * the handler's `publicStatus.result` allows.
 */
export interface PublicWorkflowStatus {
  readonly reference: string;
  /** accepted | processing | completed | follow_up_failed | cancelled */
  readonly operation: OperationState;
  /** Polling may stop: every step has finished. */
  readonly terminal: boolean;
  readonly progress: WorkflowProgress;
  readonly steps: readonly PublicWorkflowStep[];
  readonly links: { readonly self: string };
}

export function toPublicWorkflowStatus(
  w: WorkflowStatus,
  reference: string,
  selfPath: string,
  showResult: boolean,
): PublicWorkflowStatus {
  return {
    reference,
    operation: w.state,
    terminal: w.progress.done === w.progress.total,
    progress: w.progress,
    steps: w.steps.map((s) => {
      const step: PublicWorkflowStep = {
        name: s.name,
        type: s.type,
        status: s.status,
        operation: s.state,
        terminal: isTerminalOperationState(s.state),
        progress: s.progress,
        dependsOn: s.dependsOn.flatMap((d) => (d.step === null ? [] : [d.step])),
      };
      return showResult ? { ...step, result: s.result ?? null } : step;
    }),
    links: { self: selfPath },
  };
}
