// The broadcast editor: warn before leaving with changes that autosave has not stored yet,
// and let htmx show the server's explanation when an autosave is refused (409/422).
// Loaded with `defer` from templates/broadcasts/edit.html; no inline script (strict CSP).
(function () {
  "use strict";
  var form = document.getElementById("compose-form");
  if (!form) { return; }
  var edits = 0;      // bumped on every change the owner makes
  var sent = 0;       // the edit count included in the request in flight
  var stored = 0;     // the edit count the server has confirmed

  form.addEventListener("input", function () { edits += 1; });
  form.addEventListener("submit", function () { stored = edits; });
  document.body.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt === form) { sent = edits; }
  });
  document.body.addEventListener("htmx:afterRequest", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (event.detail.elt === form && status >= 200 && status < 300) {
      stored = Math.max(stored, sent);
    }
  });
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    var status = event.detail.xhr.status;
    if (event.detail.requestConfig.elt === form && (status === 409 || status === 422)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  window.addEventListener("beforeunload", function (event) {
    if (edits !== stored) {
      event.preventDefault();
      event.returnValue = "";
    }
  });
}());
