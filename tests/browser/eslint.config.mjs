// ESLint (flat config, no plugins) for the web page's modules: .ci/run installs eslint from npm
// into a cache outside the repository and runs it over src/tether/serve/static/js.
const browser = Object.fromEntries(
  [
    "window", "document", "navigator", "location", "history", "console", "fetch", "sessionStorage",
    "setTimeout", "clearTimeout", "requestAnimationFrame", "AbortController", "TextDecoderStream",
    "URL", "Intl", "Node", "Event", "HTMLElement",
  ].map((name) => [name, "readonly"]),
);

export default [
  {
    files: ["**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: browser },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      "no-undef": "error",
      "no-unused-vars": ["error", { args: "none" }],
      "no-implied-eval": "error",
      "no-eval": "error",
      "no-new-func": "error",
      "no-script-url": "error",
      "no-redeclare": "error",
      "no-dupe-keys": "error",
      "no-unreachable": "error",
      "no-const-assign": "error",
      "no-self-assign": "error",
      "no-fallthrough": "error",
      "no-shadow-restricted-names": "error",
      "no-use-before-define": ["error", { functions: false }],
      "prefer-const": "error",
      "no-var": "error",
      eqeqeq: ["error", "always"],
      "no-constant-condition": ["error", { checkLoops: false }],
    },
  },
];
