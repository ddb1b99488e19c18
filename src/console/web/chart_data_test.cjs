// node --test src/console/web/chart_data_test.cjs
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { mergeAttempts } = require('./chart_data.js');

test('a resumed attempt continues the curve from its first step', () => {
  const attempts = [
    { attempt: 1, step: [1, 2, 3, 4, 5], series: { loss: [9, 8, 7, 6, 5] } },
    // resumed from the checkpoint of step 3: its steps 3.. replace the first attempt's
    { attempt: 2, step: [3, 4, 5, 6], series: { loss: [7.1, 6.1, 5.1, 4.1] } },
  ];
  assert.deepStrictEqual(mergeAttempts(attempts, 'loss'), [[1, 2, 3, 4, 5, 6], [9, 8, 7.1, 6.1, 5.1, 4.1]]);
});

test('missing values and attempts without the key are skipped', () => {
  const attempts = [
    { attempt: 1, step: [10, 20], series: { loss: [2, 1], val_loss: [null, 1.5] } },
    { attempt: 2, step: [], series: {} },
    { attempt: 3, step: [30], series: { loss: [0.5] } },
  ];
  assert.deepStrictEqual(mergeAttempts(attempts, 'val_loss'), [[20], [1.5]]);
  assert.deepStrictEqual(mergeAttempts(attempts, 'loss'), [[10, 20, 30], [2, 1, 0.5]]);
  assert.deepStrictEqual(mergeAttempts([], 'loss'), [[], []]);
});
