// @ts-check
/*
 * The asynccmd dashboard. Every value that comes from the command table is put on the page as text
 * (textContent, text nodes, attributes of our own choosing): nothing is ever parsed as HTML, and the
 * page's Content-Security-Policy (Trusted Types with no policy) would refuse it if it were.
 *
 * Auth: the admin token, when the API has one, is typed into the login form once per tab, kept in
 * sessionStorage and sent only as `Authorization: Bearer` on this page's own requests. No cookie is
 * involved, so another site cannot make the browser send it.
 */

// The page's entry module: the login, the polled summary and the views, each part in a module of
// its own (dom.js, api.js, state.js, overview.js, outcomes.js, commands.js, detail.js, workflow.js,
// actions.js).
import { api, ApiError, describe, TOKEN_KEY, whenUnauthorized } from './api.js';
import { showList } from './commands.js';
import { showDetail } from './detail.js';
import { $ } from './dom.js';
import { renderSummary } from './overview.js';
import { page, refresh } from './state.js';
import { showWorkflow } from './workflow.js';

// ── login ─────────────────────────────────────────────────────────────────────────────────────

let loggedIn = false;

function onUnauthorized() {
  const hadToken = sessionStorage.getItem(TOKEN_KEY) !== null;
  sessionStorage.removeItem(TOKEN_KEY);
  loggedIn = false;
  stopPolling();
  for (const v of document.querySelectorAll('.view')) /** @type {HTMLElement} */ (v).hidden = true;
  $('login').hidden = false;
  $('logout').hidden = true;
  $('login-error').textContent = hadToken ? 'That token was refused. Log in again.' : '';
  /** @type {HTMLInputElement} */ ($('token')).focus();
}

$('login-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = /** @type {HTMLInputElement} */ ($('token'));
  const token = input.value.trim();
  // Cleared at once: the token is not left in the page for anything to read back.
  input.value = '';
  if (token === '') return;
  sessionStorage.setItem(TOKEN_KEY, token);
  void start();
});

$('logout').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  $('login-error').textContent = '';
  onUnauthorized();
});

// ── the shared summary, polled ────────────────────────────────────────────────────────────────

let pollTimer = 0;
let refreshMs = 5000;

function stopPolling() {
  window.clearTimeout(pollTimer);
  pollTimer = 0;
}

function schedulePoll() {
  stopPolling();
  if (!loggedIn || document.hidden) return;
  pollTimer = window.setTimeout(() => void poll(), refreshMs);
}

async function poll() {
  try {
    page.summary = await api('/dashboard/api/summary');
    refreshMs = Math.max(250, Number(page.summary.refreshMs) || 5000);
    renderSummary(page.summary);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    $('updated').textContent = `could not refresh: ${describe(e)}`;
  }
  schedulePoll();
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) stopPolling();
  else if (loggedIn) void poll();
});

// ── views ─────────────────────────────────────────────────────────────────────────────────────

async function route() {
  if (!loggedIn) return;
  page.generation += 1;
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path = '/', query = ''] = hash.split('?');
  const detail = /^\/commands\/([^/]+)$/.exec(path);
  const workflow = /^\/workflows\/([^/]+)$/.exec(path);
  const view = detail
    ? 'detail'
    : workflow
      ? 'workflow'
      : path.startsWith('/commands')
        ? 'commands'
        : 'overview';
  for (const name of ['overview', 'commands', 'detail', 'workflow']) $(`view-${name}`).hidden = name !== view;
  for (const link of document.querySelectorAll('nav a')) {
    link.classList.toggle(
      'current',
      link.getAttribute('data-view') === (view === 'detail' || view === 'workflow' ? 'commands' : view),
    );
  }
  if (detail) await showDetail(decodeURIComponent(detail[1] ?? ''));
  else if (workflow) await showWorkflow(safeDecode(workflow[1] ?? ''));
  else if (view === 'commands') await showList(new URLSearchParams(query));
}

/** A hash segment as text; one that is not percent-encoded UTF-8 as it stands. @param {string} segment */
function safeDecode(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

window.addEventListener('hashchange', () => void route());
whenUnauthorized(onUnauthorized);
refresh.overview = () => void poll();
refresh.view = () => void route();

async function start() {
  $('login-error').textContent = '';
  try {
    page.summary = await api('/dashboard/api/summary');
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) {
      $('login').hidden = true;
      $('updated').textContent = `could not load: ${describe(e)}`;
    }
    return;
  }
  loggedIn = true;
  $('login').hidden = true;
  $('logout').hidden = sessionStorage.getItem(TOKEN_KEY) === null;
  refreshMs = Math.max(250, Number(page.summary.refreshMs) || 5000);
  renderSummary(page.summary);
  await route();
  schedulePoll();
}

void start();
