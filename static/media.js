// The media library in the browser: the picker beside each body editor (templates/media/
// _insert.html) and the Media page's drop and paste. Picking an image only dispatches
//   document.dispatchEvent(new CustomEvent("broadside:insert-image",
//     {detail: {target, url, alt, width, height}}))
// (url absolute, width the 1x width in CSS pixels); the editor whose textarea id is `target`
// inserts it in its own mode. Loaded by every include on a page: it sets itself up once.
(function () {
  "use strict";
  if (window.broadsideMediaReady) { return; }
  window.broadsideMediaReady = true;

  var items = new WeakMap();  // dialog -> the images listed in it
  var openers = new WeakMap();  // dialog -> the button that opened it (focus goes back)
  var timers = new WeakMap();

  function part(dialog, name) { return dialog.querySelector("[data-media-" + name + "]"); }

  // The words, in the page's language: the template's `data-media-words` (templates/media/
  // _words.html), `{name}`-style holes filled in here.
  function say(node, key, values) {
    var holder = node.closest ? node.closest("[data-media-words]") : null;
    var words = {};
    try { words = JSON.parse((holder || document.querySelector("[data-media-words]")).dataset.mediaWords); }
    catch (ignored) { words = {}; }
    return String(words[key] || key).replace(/\{(\w+)\}/g, function (hole, name) {
      return values && name in values ? String(values[name]) : hole;
    });
  }

  function insert(dialog, item) {
    document.dispatchEvent(new CustomEvent("broadside:insert-image", {detail: {
      target: dialog.dataset.mediaTarget, url: item.url, alt: item.alt || "",
      width: item.width, height: item.height}}));
    dialog.close();
  }

  function describe(dialog, item) {
    var name = item.name || say(dialog, "image", {id: item.id});
    return name + ", " + item.width + " × " + item.height + " px" +
      (item.alt ? "" : ", " + say(dialog, "noAlt"));
  }

  function show(dialog, list) {
    var picks = part(dialog, "picks");
    var status = part(dialog, "status");
    items.set(dialog, list);
    picks.replaceChildren();
    list.forEach(function (item, index) {
      var li = document.createElement("li");
      var button = document.createElement("button");
      button.type = "button";
      button.className = "media-pick";
      button.dataset.mediaPick = String(index);
      var img = document.createElement("img");
      img.src = item.src;
      img.alt = "";
      img.width = item.width;
      img.height = item.height;
      img.loading = "lazy";
      var words = document.createElement("span");
      words.className = "media-pick-words";
      words.textContent = describe(dialog, item);
      button.append(img, words);
      li.append(button);
      picks.append(li);
    });
    var query = part(dialog, "search").value.trim();
    var one = list.length === 1 ? "One" : "Many";
    status.textContent = list.length ?
      say(dialog, (query ? "match" : "inLibrary") + one, {n: list.length, query: query}) :
      (query ? say(dialog, "noMatch", {query: query}) : say(dialog, "empty"));
  }

  function load(dialog) {
    var query = part(dialog, "search").value.trim();
    var url = dialog.dataset.mediaLibrary + (query ? "?q=" + encodeURIComponent(query) : "");
    fetch(url, {headers: {Accept: "application/json"}, credentials: "same-origin"})
      .then(function (answer) {
        if (!answer.ok) { throw new Error(say(dialog, "unreadable", {status: answer.status})); }
        return answer.json();
      })
      .then(function (body) { show(dialog, body.items); })
      .catch(function (error) { part(dialog, "status").textContent = error.message; });
  }

  function chosen(dialog, files) {
    if (!files || !files.length) { return false; }
    var input = part(dialog, "file");
    var transfer = new DataTransfer();
    transfer.items.add(files[0]);
    input.files = transfer.files;
    part(dialog, "error").textContent = "";
    part(dialog, "alt").focus();  // the alt text is asked before the upload
    return true;
  }

  function upload(dialog) {
    var input = part(dialog, "file");
    var error = part(dialog, "error");
    var button = part(dialog, "send");
    if (!input.files.length) {
      error.textContent = say(dialog, "chooseFile");
      input.focus();
      return;
    }
    var form = new FormData();
    form.append("file", input.files[0]);
    form.append("alt", part(dialog, "alt").value);
    form.append("csrf_token", dialog.dataset.csrf);
    button.disabled = true;
    error.textContent = "";
    part(dialog, "status").textContent = say(dialog, "uploading", {name: input.files[0].name});
    fetch(dialog.dataset.mediaUpload, {method: "POST", body: form, credentials: "same-origin",
                                       headers: {Accept: "application/json",
                                                 "X-CSRFToken": dialog.dataset.csrf}})
      .then(function (answer) {
        return answer.json().catch(function () {
          return {error: say(dialog, "refusedStatus", {status: answer.status})};
        }).then(function (body) { return {ok: answer.ok, body: body}; });
      })
      .then(function (result) {
        if (!result.ok) { throw new Error(result.body.error || say(dialog, "refused")); }
        input.value = "";
        part(dialog, "alt").value = "";
        insert(dialog, result.body);
      })
      .catch(function (failure) {
        error.textContent = failure.message;
        part(dialog, "status").textContent = "";
      })
      .finally(function () { button.disabled = false; });
  }

  function open(dialog, opener) {
    openers.set(dialog, opener);
    part(dialog, "error").textContent = "";
    dialog.showModal();
    part(dialog, "search").focus();
    load(dialog);
  }

  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    if (!target) { return; }
    var opener = target.closest("[data-media-open]");
    if (opener) {
      var dialog = document.getElementById(opener.dataset.mediaOpen);
      if (dialog) { open(dialog, opener); }
      return;
    }
    var inside = target.closest("dialog.media-dialog");
    if (!inside) { return; }
    if (target.closest("[data-media-close]")) { inside.close(); return; }
    if (target.closest("[data-media-send]")) { upload(inside); return; }
    var pick = target.closest("[data-media-pick]");
    if (pick) { insert(inside, items.get(inside)[Number(pick.dataset.mediaPick)]); }
  });

  document.addEventListener("close", function (event) {
    var dialog = event.target;
    if (dialog instanceof HTMLDialogElement && openers.has(dialog)) { openers.get(dialog).focus(); }
  }, true);

  document.addEventListener("input", function (event) {
    var target = event.target;
    if (!(target instanceof Element) || !target.matches("[data-media-search]")) { return; }
    var dialog = target.closest("dialog");
    clearTimeout(timers.get(dialog));
    timers.set(dialog, setTimeout(function () { load(dialog); }, 250));
  });

  // Enter inside the dialog must not submit the editor's form around it.
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key !== "Enter" || !(target instanceof HTMLInputElement)) { return; }
    var dialog = target.closest("dialog.media-dialog");
    if (!dialog) { return; }
    event.preventDefault();
    if (target.matches("[data-media-search]")) { load(dialog); }
    if (target.matches("[data-media-alt]")) { upload(dialog); }
  });

  // Drop or paste an image: into the dialog open, or onto the Media page's upload form.
  function zoneOf(node) {
    var open = document.querySelector("dialog.media-dialog[open]");
    if (open) { return open; }
    return document.querySelector("form[data-media-page-upload]");
  }

  function takeFiles(zone, files) {
    if (zone instanceof HTMLDialogElement) { return chosen(zone, files); }
    if (!files || !files.length) { return false; }
    var input = zone.querySelector("input[type=file]");
    var transfer = new DataTransfer();
    transfer.items.add(files[0]);
    input.files = transfer.files;
    var said = zone.querySelector("[data-media-chosen]");
    if (said) { said.textContent = say(zone, "chosen", {name: files[0].name}); }
    var alt = zone.querySelector("input[name=alt]");
    if (alt) { alt.focus(); }
    return true;
  }

  function imageFiles(list) {
    return Array.prototype.filter.call(list || [], function (file) {
      return /^image\//.test(file.type);
    });
  }

  document.addEventListener("dragover", function (event) {
    var zone = zoneOf(event.target);
    if (!zone || !event.dataTransfer || Array.prototype.indexOf.call(event.dataTransfer.types, "Files") < 0) { return; }
    event.preventDefault();
    zone.classList.add("media-dropping");
  });
  document.addEventListener("dragleave", function (event) {
    var zone = zoneOf(event.target);
    if (zone) { zone.classList.remove("media-dropping"); }
  });
  document.addEventListener("drop", function (event) {
    var zone = zoneOf(event.target);
    if (!zone || !event.dataTransfer) { return; }
    zone.classList.remove("media-dropping");
    var files = imageFiles(event.dataTransfer.files);
    if (files.length || event.dataTransfer.files.length) { event.preventDefault(); }
    takeFiles(zone, files.length ? files : event.dataTransfer.files);
  });
  document.addEventListener("paste", function (event) {
    var zone = zoneOf(event.target);
    if (!zone || !event.clipboardData) { return; }
    var files = imageFiles(event.clipboardData.files);
    if (files.length && takeFiles(zone, files)) { event.preventDefault(); }
  });
}());
