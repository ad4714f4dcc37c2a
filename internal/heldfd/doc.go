// Package heldfd counts the file descriptors a process keeps open for
// the files they name: how many, the sizes of their files (the disk a
// deleted file's descriptor keeps from being reclaimed) and how many of
// those files were deleted at the last check. The sampler's ipc client
// (executables kept to be sent again) and the encoder's symbolizer
// (executables kept to be read) bound what they hold by these counts.
package heldfd
