/* The scrub: a background walk of every object of the store, hashing
 * each at a bounded rate and removing one whose bytes no longer hash to
 * its name, before a client asks for it (as a ZFS scrub does).  Bit rot
 * moves neither a file's size nor its times, so the verifier, which
 * hashes an object once a mount while those stay (verify.h), would serve
 * rotten bytes it found intact before: the scrub finds them.
 *
 * A rotten object's links go (its anchor and every reference, all in one
 * fan-out directory): the names that used it find it missing at their
 * next resolve and are purged there, as any torn name (never served).
 * The walk goes one fan-out directory after the other, each inode hashed
 * once; where it is (the next fan-out directory) is kept in an xattr of
 * objects/, so that a remount resumes there (a lower file system without
 * user xattrs starts over).  Knows nothing of FUSE. */
#pragma once
#include <stdint.h>

struct kvt_store;
struct kvt_verifier;
struct kvt_scrubber;

/* Where the walk resumes: "<next fan-out directory, 0-255>". */
#define KVT_SCRUB_XATTR "user.kvtierfs.scrub"

/* Starts the walk, @rate bytes hashed a second at most; @v forgets what
 * it knew of a rotten object.  Passes follow each other, the next one
 * @interval seconds after the last ended. */
struct kvt_scrubber *kvt_scrubber_start(struct kvt_store *s, struct kvt_verifier *v,
					uint64_t rate, double interval);
/* Stops it (the object being hashed is finished first) and frees it. */
void kvt_scrubber_free(struct kvt_scrubber *sc);
