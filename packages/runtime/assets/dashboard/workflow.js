// @ts-check
/* The asynccmd dashboard: a workflow's steps, drawn as a graph (see app.js). Values from the table go on the page as text only. */
import { api, describe } from './api.js';
import { $, el, fill, progressView, STATUSES, statusBadge, svg } from './dom.js';
import { page } from './state.js';

/** Steps shown of one layer; the others are counted by status. */
const LAYER_SHOWN = 50;
/** The steps drawn last, for drawing their edges again when the page is resized. */
/** @type {any[] | null} */
let drawnSteps = null;

/** @param {string} id */
export async function showWorkflow(id) {
  const mine = page.generation;
  $('workflow-title').textContent = `Workflow ${id}`;
  $('workflow-error').textContent = '';
  $('workflow-summary').textContent = '';
  $('workflow-progress').hidden = true;
  fill($('workflow-graph'));
  drawnSteps = null;
  let view;
  try {
    view = await api(`/workflows/${encodeURIComponent(id)}`);
  } catch (e) {
    if (mine === page.generation) $('workflow-error').textContent = describe(e);
    return;
  }
  if (mine !== page.generation) return;
  $('workflow-title').replaceChildren(
    `Workflow ${view.id} `,
    el('span', { class: `badge state-${String(view.state)}` }, view.state),
  );
  const p = view.progress;
  $('workflow-summary').textContent =
    `${p.done} of ${p.total} step(s) finished, ${Math.floor(p.fraction * 100)}% done ` +
    '(the steps in columns by how many steps they wait behind; each waits for those linked to it from the left).';
  const bar = /** @type {HTMLProgressElement} */ ($('workflow-progress'));
  bar.value = p.fraction;
  bar.hidden = false;
  renderWorkflowGraph(view.steps);
}

/**
 * The steps in layers by depth (a step one layer right of the deepest it waits for), each a card
 * with its state, progress and what it waits for; the edges are lines drawn between the cards.
 * @param {any[]} steps
 */
function renderWorkflowGraph(steps) {
  const byName = new Map(steps.map((s) => [s.name, s]));
  /** @type {Map<string, number>} */
  const depth = new Map();
  /** @param {any} step @returns {number} */
  const depthOf = (step) => {
    const known = depth.get(step.name);
    if (known !== undefined) return known;
    depth.set(step.name, 0); // a cycle cannot be stored; this only guards the walk
    const inner = step.dependsOn.filter((/** @type {any} */ d) => d.step !== null && byName.has(d.step));
    const d =
      inner.length === 0
        ? 0
        : 1 + Math.max(...inner.map((/** @type {any} */ x) => depthOf(byName.get(x.step))));
    depth.set(step.name, d);
    return d;
  };
  /** @type {any[][]} */
  const layers = [];
  for (const s of steps) (layers[depthOf(s)] ??= []).push(s);
  const columns = layers.map((layer, i) => {
    const shown = layer.slice(0, LAYER_SHOWN);
    const rest = layer.slice(LAYER_SHOWN);
    return el(
      'ol',
      { class: 'wf-layer', 'data-depth': String(i) },
      ...shown.map(stepCard),
      rest.length > 0
        ? el('li', { class: 'wf-more muted' }, `and ${rest.length} more: ${countByStatus(rest)}`)
        : null,
    );
  });
  fill(
    $('workflow-graph'),
    svg('svg', { class: 'wf-edges', 'aria-hidden': 'true' }),
    el('div', { class: 'wf-layers' }, ...columns),
  );
  drawnSteps = steps;
  drawEdges(steps);
}

/** @param {any[]} steps */
function countByStatus(steps) {
  /** @type {Record<string, number>} */
  const counts = {};
  for (const s of steps) counts[s.status] = (counts[s.status] ?? 0) + 1;
  return STATUSES.filter((st) => counts[st])
    .map((st) => `${counts[st]} ${st}`)
    .join(', ');
}

/** @param {any} s */
function stepCard(s) {
  const after = s.dependsOn.map((/** @type {any} */ d) => (d.step === null ? `command ${d.id}` : d.step));
  return el(
    'li',
    { class: 'wf-step', 'data-step': s.name, 'data-status': s.status },
    el(
      'div',
      { class: 'wf-step-head' },
      el('a', { href: `#/commands/${encodeURIComponent(s.id)}` }, s.name),
      ' ',
      statusBadge(s.status),
    ),
    el('div', { class: 'mono muted' }, s.type),
    s.progress ? progressView(s.progress) : null,
    after.length > 0 ? el('div', { class: 'wf-after muted' }, `after ${after.join(', ')}`) : null,
    s.lastError
      ? el('div', { class: s.status === 'CANCELLED' ? 'reason-text' : 'error-text' }, s.lastError)
      : null,
  );
}

/**
 * A line from each shown card to each shown card that waits for it, measured from where the
 * browser laid them out.
 * @param {any[]} steps
 */
function drawEdges(steps) {
  const graph = $('workflow-graph');
  const lines = graph.querySelector('svg.wf-edges');
  if (lines === null) return;
  const origin = graph.getBoundingClientRect();
  /** @type {Map<string, DOMRect>} */
  const boxes = new Map();
  for (const card of graph.querySelectorAll('li.wf-step')) {
    boxes.set(card.getAttribute('data-step') ?? '', card.getBoundingClientRect());
  }
  const x = (/** @type {number} */ v) => v - origin.left + graph.scrollLeft;
  const y = (/** @type {number} */ v) => v - origin.top + graph.scrollTop;
  lines.setAttribute('width', String(graph.scrollWidth));
  lines.setAttribute('height', String(graph.scrollHeight));
  const drawn = [];
  for (const s of steps) {
    const to = boxes.get(s.name);
    if (to === undefined) continue;
    for (const d of s.dependsOn) {
      const from = d.step === null ? undefined : boxes.get(d.step);
      if (from === undefined) continue;
      drawn.push(
        svg('line', {
          x1: x(from.right),
          y1: y(from.top + from.height / 2),
          x2: x(to.left),
          y2: y(to.top + to.height / 2),
          'data-from': d.step,
          'data-to': s.name,
        }),
      );
    }
  }
  lines.replaceChildren(...drawn);
}

window.addEventListener('resize', () => {
  if (drawnSteps !== null && !$('view-workflow').hidden) drawEdges(drawnSteps);
});
