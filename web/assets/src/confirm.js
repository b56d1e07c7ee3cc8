// Forms that lose work (Start over, End scenario, Delete) ask first in the
// page's one dialog, saying what happens and what is lost; the dialog's
// answer posts the form with confirmed=yes. Without script, the server
// asks on a page of its own.
const dialog = document.getElementById("confirm-dialog");

function ask(form) {
  if (!dialog || typeof dialog.showModal !== "function") return false;
  dialog.querySelector("#confirm-title").textContent = form.dataset.confirmTitle;
  dialog.querySelector("#confirm-text").textContent = form.dataset.confirmText;
  dialog.querySelector("#confirm-ok").textContent = form.dataset.confirmButton;
  dialog.returnValue = "";
  dialog.onclose = () => {
    if (dialog.returnValue !== "ok") { form.querySelector("button[type=submit]")?.focus(); return; }
    form.elements.confirmed.value = "yes";
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    window.svclabLeaving = true;
    form.submit();
  };
  dialog.showModal();
  dialog.querySelector("#confirm-cancel").focus();
  return true;
}

for (const form of document.querySelectorAll("form.confirm-form")) {
  form.addEventListener("submit", (e) => {
    if (form.elements.confirmed.value === "yes") return;
    if (ask(form)) e.preventDefault();
  });
}

// svclabConfirm asks for the form with the given id (the health strip's
// Start over asks as the attempt's button does).
window.svclabConfirm = (id) => {
  const form = document.getElementById(id)?.closest("form.confirm-form");
  if (form && !ask(form)) { window.svclabLeaving = true; form.submit(); }
};
