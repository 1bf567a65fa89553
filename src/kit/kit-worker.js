/* kit-worker.js: the kit's Web Worker. The page builds it from a Blob of the
 * engine's text (dc-kit-engine.js) followed by this file, so DcKit is a
 * global here. It checks and loads the blob, then generates, posting each
 * token as it comes so that the page never freezes.
 *
 * Messages in:  {type: 'load', bytes}  {type: 'generate', prompt, tokens, temperature, seed}
 * Messages out: {type: 'ready', info}  {type: 'token', id, index}
 *               {type: 'done', ids, seconds}  {type: 'error', code, message}
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
'use strict';

(function () {
  let model = null;

  function fail (code, error) {
    const message = error && error.message ? error.message : String (error);
    self.postMessage ({ type: 'error', code: code, message: message });
  }

  self.onmessage = function (event) {
    const msg = event.data;

    if (msg.type === 'load') {
      try {
        model = DcKit.loadModel (msg.bytes);
      } catch (error) {
        model = null;
        fail (error && error.code ? error.code : 'bad-kit', error);
        return;
      }
      self.postMessage ({ type: 'ready', info: model.info });
    } else if (msg.type === 'generate') {
      if (model === null) {
        fail ('not-ready', 'the kit is not loaded');
        return;
      }
      try {
        const start = performance.now ();
        const ids = model.generate (msg.prompt,
                                    { tokens: msg.tokens, temperature: msg.temperature,
                                      seed: msg.seed },
                                    function (id, index) {
                                      self.postMessage ({ type: 'token', id: id, index: index });
                                    });
        const seconds = (performance.now () - start) / 1000;
        self.postMessage ({ type: 'done', ids: Array.from (ids), seconds: seconds });
      } catch (error) {
        fail (error && error.code ? error.code : 'generate', error);
      }
    }
  };
}) ();
