// The console's only script besides htmx: "select all" for the bulk actions. No memory text
// ever passes through here; it is rendered (escaped) by the server.
"use strict";
document.addEventListener("change", function (event) {
  var box = event.target;
  if (!box || box.id !== "select-all") return;
  var form = box.closest("form");
  if (!form) return;
  form.querySelectorAll('input[type="checkbox"][name="ids"]').forEach(function (item) {
    item.checked = box.checked;
  });
});
