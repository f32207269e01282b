// Package tune searches a recorded kernel's configuration space for the
// fastest verified configuration: parameter types and search spaces (built-in
// presets and declarative YAML), samplers with an ask/tell interface
// (exhaustive, random, TPE), a parallel executor over `mneme worker`
// processes speaking the JSON-lines protocol of PROTOCOL.md, and the results
// directory with resume and the tuned-kernel exports.
package tune
