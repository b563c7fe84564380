// The benchmark build with its JS/wasm boundary calls counted: the profile's
// Worker entry (see boundary.mjs). The counter must load first, before the
// Worker's module instantiates its wasm.

import "./boundary.mjs";

export * from "../../build/test/entry.mjs";
export { default } from "../../build/test/entry.mjs";
