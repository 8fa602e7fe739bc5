// Records uncaught errors and console.error calls on <body data-errors>,
// so that a headless browser test can read them from the DOM.
(function () {
  const errors = [];
  const record = (msg) => {
    errors.push(String(msg));
    if (document.body) document.body.dataset.errors = errors.join("\n");
  };
  window.addEventListener("error", (e) => record(e.message || e));
  window.addEventListener("unhandledrejection", (e) => record(e.reason && e.reason.message ? e.reason.message : e.reason));
  const orig = console.error;
  console.error = function (...args) {
    record(args.join(" "));
    orig.apply(console, args);
  };
})();
