// The segment builder's "Edit as JSON" box: it shows the rules the builder holds as the owner
// changes them, and the page says which of the two saving will use (the one changed last).
// The hidden `rules_source` carries that to the server (webapp/segments/submission.py); the
// builder's rules as JSON come from the server (POST /segments/builder/json), which alone
// turns the builder's fields into rules. Without JavaScript the form works as before: the box
// wins when it differs from what the page showed. Loaded with `defer` from
// templates/segments/edit.html; delegated on the document, since htmx swaps the builder.
(function () {
  "use strict";
  var form = document.getElementById("segment-form");
  if (!form) { return; }
  var asked = 0;      // bumped on every change: an answer to an older question is dropped
  var timer = null;

  function byId(id) { return document.getElementById(id); }
  function source() { var input = byId("rules_source"); return input ? input.value : ""; }

  function setSource(kind) {
    var input = byId("rules_source");
    var note = byId("rules-source");
    if (input) { input.value = kind; }
    if (note) {
      note.textContent = note.dataset[kind];
      note.classList.toggle("from-json", kind === "json");
    }
  }

  function followBuilder() {
    var box = byId("rules_json");
    if (!box || source() === "json") { return; }
    asked += 1;
    var question = asked;
    fetch(box.dataset.followUrl, {method: "POST", body: new FormData(form), credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (answer) {
        var box = byId("rules_json");
        var shown = form.querySelector('input[name="rules_json_shown"]');
        if (!answer || question !== asked || source() === "json" || !box || !shown) { return; }
        box.value = answer.rules_json;
        shown.value = answer.rules_json;
      })
      .catch(function () { /* offline: the box keeps its text, and saving uses the builder */ });
  }

  function soon() {
    asked += 1;
    window.clearTimeout(timer);
    timer = window.setTimeout(followBuilder, 150);
  }

  function changed(event) {
    var target = event.target;
    if (!form.contains(target) || !target.name) { return; }
    if (target.name === "rules_json") {
      asked += 1;
      setSource(target.value.trim() ? "json" : "builder");
    } else if (/^[gc]-/.test(target.name)) {
      setSource("builder");
      soon();
    }
  }
  document.addEventListener("input", changed);
  document.addEventListener("change", changed);

  // Add and Remove change the builder: say so before htmx collects the form (capture phase).
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest('button[name="action"]');
    if (button && form.contains(button) && /^(add-condition|add-group|remove):/.test(button.value)) {
      setSource("builder");
    }
  }, true);

  // A condition re-rendered after its field changed may have dropped its value; opening the
  // box shows what the builder holds now.
  document.addEventListener("htmx:afterSettle", function (event) {
    if (form.contains(event.target)) { soon(); }
  });
  document.addEventListener("toggle", function (event) {
    if (event.target.classList && event.target.classList.contains("json-box") && event.target.open) {
      followBuilder();
    }
  }, true);
}());
