// @ts-check
/* The asynccmd dashboard: the actions, each explained and confirmed before it is sent (see app.js). Values from the table go on the page as text only. */
import { api, describe } from './api.js';
import { $, time, toast } from './dom.js';
import { page, refresh } from './state.js';

/**
 * What each action does, in words, before it is done.
 * @type {Record<string, { title: string, explain: (c: any) => string, reason: 'none' | 'optional' | 'required', danger: boolean }>}
 */
const ACTIONS = {
  retry: {
    title: 'Retry',
    explain: (c) =>
      `Command ${c.id} (${c.type}) is DEAD. Retry makes it PENDING with fresh attempts, due now: an instance will run its executor again.`,
    reason: 'none',
    danger: false,
  },
  requeue: {
    title: 'Requeue',
    explain: (c) =>
      `Command ${c.id} (${c.type}) is RUNNING. Requeue puts it back to PENDING, due now, and fences out the current claim: ` +
      'if its executor is still running, its outcome will not be recorded, and the command runs again.',
    reason: 'none',
    danger: false,
  },
  cancel: {
    title: 'Cancel',
    explain: (c) =>
      `Command ${c.id} (${c.type}) has not started. Cancel makes it CANCELLED: it will never run. The reason, if given, is kept as its lastError.`,
    reason: 'optional',
    danger: false,
  },
  kill: {
    title: 'Kill',
    explain: (c) =>
      `Command ${c.id} (${c.type}) is ${c.status}. Kill makes it CANCELLED: it will never run again` +
      `${c.status === 'RUNNING' ? ', and the outcome of the run in progress will not be recorded' : ''}. The reason is kept as its lastError.`,
    reason: 'required',
    danger: true,
  },
};

/**
 * Asks, and resolves with the reason typed (or '') when confirmed, null when not.
 * @param {string} title
 * @param {string} message
 * @param {'none' | 'optional' | 'required'} reason
 * @param {boolean} danger
 * @param {number} [reasonMaxLength] what the route takes
 * @returns {Promise<string | null>}
 */
function ask(title, message, reason, danger, reasonMaxLength = 2000) {
  const dialog = /** @type {HTMLDialogElement} */ ($('confirm'));
  const input = /** @type {HTMLInputElement} */ ($('confirm-reason'));
  $('confirm-title').textContent = `${title}?`;
  $('confirm-message').textContent = message;
  $('confirm-reason-label').hidden = reason === 'none';
  input.value = '';
  input.maxLength = reasonMaxLength;
  input.required = reason === 'required';
  const ok = $('confirm-ok');
  ok.textContent = title;
  ok.className = danger ? 'danger' : '';
  return new Promise((resolve) => {
    const form = /** @type {HTMLFormElement} */ ($('confirm-form'));
    /** @param {SubmitEvent} event */
    const onSubmit = (event) => {
      event.preventDefault();
      const confirmed = event.submitter === ok;
      if (confirmed && input.required && input.value.trim() === '') {
        input.reportValidity();
        return;
      }
      dialog.close();
      done(confirmed ? input.value.trim() : null);
    };
    const onClose = () => done(null);
    /** @param {string | null} value */
    const done = (value) => {
      form.removeEventListener('submit', onSubmit);
      dialog.removeEventListener('close', onClose);
      resolve(value);
    };
    form.addEventListener('submit', onSubmit);
    dialog.addEventListener('close', onClose);
    dialog.showModal();
    (reason === 'none' ? ok : input).focus();
  });
}

/** @param {string} name @param {any} command */
export async function confirmAction(name, command) {
  const action = ACTIONS[name];
  if (!action) return;
  const reason = await ask(action.title, action.explain(command), action.reason, action.danger);
  if (reason === null) return;
  try {
    const body = action.reason !== 'none' && reason !== '' ? { reason } : {};
    const after = await api(`/commands/${encodeURIComponent(command.id)}/${name}`, {
      method: 'POST',
      body,
    });
    toast(`Command ${after.id}: ${name} done, now ${after.status}.`);
  } catch (e) {
    toast(`Command ${command.id}: ${name} refused — ${describe(e)}`);
  }
  refresh.overview();
  refresh.view();
}

/**
 * Pauses a type for every instance (asking for an optional reason), or resumes it.
 * @param {string} type
 * @param {{ pausedAt: string, reason: string | null } | undefined} pause
 */
export async function confirmTypePause(type, pause) {
  const pending = page.summary?.stats?.byType?.[type]?.PENDING ?? 0;
  const reason = pause
    ? await ask(
        `Resume ${type}`,
        `Type ${type} is paused (since ${time(pause.pausedAt)}${pause.reason ? `: ${pause.reason}` : ''}). ` +
          `Resume lets its ${pending} pending command(s) run again, on every instance.`,
        'none',
        false,
      )
    : await ask(
        `Pause ${type}`,
        `No instance will start a command of type ${type} until it is resumed: its ${pending} pending command(s) wait, ` +
          'new ones are still accepted, and those already running finish. The reason, if given, is shown with the pause.',
        'optional',
        false,
        1000,
      );
  if (reason === null) return;
  const action = pause ? 'resume' : 'pause';
  try {
    const after = await api(`/types/${encodeURIComponent(type)}/${action}`, {
      method: 'POST',
      body: action === 'pause' && reason !== '' ? { reason } : {},
    });
    toast(
      `Type ${after.type}: ${after.changed ? `${action}d` : `was ${after.paused ? 'paused' : 'not paused'} already`}.`,
    );
  } catch (e) {
    toast(`Type ${type}: ${action} refused — ${describe(e)}`);
  }
  refresh.overview();
}

/** @param {any[]} dead */
export async function confirmBulkRetry(dead) {
  const ids = dead.map((c) => String(c.id));
  const shown =
    ids.length > 12 ? `${ids.slice(0, 12).join(', ')} and ${ids.length - 12} more` : ids.join(', ');
  const confirmed = await ask(
    `Retry ${ids.length} dead letter(s)`,
    `The dead letters shown (${shown}) become PENDING with fresh attempts, due now, each that is still DEAD; ` +
      'any that changed meanwhile is left as it is and reported.',
    'none',
    false,
  );
  if (confirmed === null) return;
  try {
    const result = await api('/dashboard/api/retry', { method: 'POST', body: { ids } });
    const refused = result.refused.map((/** @type {any} */ r) => `${r.id} (${r.code})`).join(', ');
    toast(`Retried ${result.retried.length} dead letter(s).${refused ? ` Not retried: ${refused}.` : ''}`);
  } catch (e) {
    toast(`Bulk retry refused — ${describe(e)}`);
  }
  refresh.overview();
  refresh.view();
}
