// Package labels computes the label set of every sample the way parca-agent
// does, for the encoders that speak Parca's Arrow formats.
//
// A Labeler builds, per process, the base set parca-agent builds (the
// reference is docs/parca-protocols.md §4): node, the process's comm and
// __meta_* labels made from the stream's process labels (__meta_process_pid,
// __meta_process_comm, __meta_process_executable_name,
// __meta_process_executable_path, __meta_process_container_id,
// __meta_process_systemd_unit, __meta_process_service_name and
// __meta_env_var_<NAME> for each recorded environment variable), and for a
// process in a Kubernetes pod (Input.Workload, from encoder/kube) the
// __meta_kubernetes_* labels parca-agent offers and, when there are no
// relabel rules, the labels parca-agent's Kubernetes configuration writes:
// namespace, pod, container and container_image. It applies the Prometheus
// relabel_configs (github.com/prometheus/prometheus/model/relabel, standard
// semantics: replace, keep, drop, keepequal, dropequal, hashmod, labelmap,
// labeldrop, labelkeep, lowercase, uppercase) and then deletes every label
// starting with __meta_; other labels starting with __ stay, as in
// parca-agent. The result and the keep/drop decision are cached per PID for
// Config.CacheTTL; an entry is rebuilt earlier when the process's labels
// differ from those it was built from (exec, PID reuse, another node, or a
// pod the API reported, changed or forgot since: a miss is never cached).
//
// Per sample, the Labeler adds cpu, thread_id and thread_name (unless
// disabled), replacing a base label of the same name. Probe-origin samples
// of a kept process are relabelled once more, per sample: the process's
// labels as they were before relabelling plus those three and __meta_cpu,
// __meta_thread_id and __meta_thread_comm (deleted again afterwards), so
// rules can use thread and CPU. (parca-agent re-runs the rules over the
// already relabelled set instead, which applies them twice and makes a
// replace rule whose source was a __meta_* label delete its own result.) Last
// come the sample's custom labels (Go pprof labels): keys that are not valid
// UTF-8 are skipped, a value cut inside a UTF-8 rune loses the partial rune,
// other invalid values are skipped, and a custom label never replaces a
// label already in the set. External labels are never relabelled: Labels
// (the encoders' entry point, reading a sample of an encoder.Flush) adds
// those the sample lacks; Sample leaves them out, for encoders that add
// External once per flush, as parca-agent does.
//
// Samples dropped by relabelling are counted in
// tandem_encoder_labels_dropped_by_relabel_total.
//
// # Concurrency and lifetime
//
// A Labeler is not safe for concurrent use: Sample and Labels share its
// buffers and its cache. Labels appends to the caller's slice; the slice
// Sample returns is valid until the next call of Sample or Labels. The
// strings in either may be kept. External may be called at any time.
//
// A cache hit costs no allocation. Expiry is checked against a clock read
// once per 64 samples.
package labels
