// Package tune searches a recorded kernel's configuration space for the
// fastest verified configuration: parameter types and search spaces (built-in
// presets, reshaped by Mneme's space options, and declarative YAML), samplers
// with an ask/tell interface (exhaustive, random, TPE, and a proposer in
// Python for a user's SearchSpace class or an Optuna study), a parallel
// executor over `mneme worker` processes speaking the JSON-lines protocol of
// PROTOCOL.md, and the results directory with resume and the tuned-kernel
// exports. It is the one tuner: Mneme's spellings are read into its Options.
package tune
