// Chart data of the training page, shared with its unit test (node).
'use strict';

// One curve over every attempt: a later attempt replaces the steps it re-ran
// (a resumed attempt continues the curve from its checkpoint's step).
// attempts: [{attempt, step: [...], series: {key: [...]}}] in attempt order.
// Returns [steps, values] for uPlot.
function mergeAttempts(attempts, key) {
  const xs = [], ys = [];
  attempts.forEach((a, i) => {
    const nextStart = i + 1 < attempts.length && attempts[i + 1].step.length ? attempts[i + 1].step[0] : Infinity;
    const col = a.series[key];
    if (!col) return;
    a.step.forEach((s, j) => {
      if (s < nextStart && col[j] !== null && col[j] !== undefined) { xs.push(s); ys.push(col[j]); }
    });
  });
  return [xs, ys];
}

if (typeof module !== 'undefined') module.exports = { mergeAttempts };
