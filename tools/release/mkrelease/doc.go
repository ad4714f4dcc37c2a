// Command mkrelease builds Tandem's release (make release), its image
// alone (make image), and pushes a release to a registry:
//
//	mkrelease build --out bin/release
//	mkrelease image --out bin/tandem-image.oci.tar
//	mkrelease push --dir bin/release --registry registry.example:5000
//	mkrelease version
//
// Every artefact carries the version tools/release/version.sh prints.
package main
