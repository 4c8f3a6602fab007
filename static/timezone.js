// The sign-up form's hidden time zone field (templates/signup/join.html): filled with the
// IANA name the browser uses ("Asia/Tokyo"), so a broadcast "at 09:00 in each reader's time
// zone" reaches this reader at their 09:00. Without JavaScript, or when the browser says
// nothing, the field stays empty and nothing is stored (the server checks the name too).
(function () {
  "use strict";
  var zone = "";
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (e) {
    zone = "";
  }
  var fields = document.querySelectorAll("input[data-browser-timezone]");
  for (var i = 0; i < fields.length; i += 1) {
    fields[i].value = zone;
  }
})();
