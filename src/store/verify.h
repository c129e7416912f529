/* The verifier: an object's bytes are checked against its XXH3-128 before
 * a mount serves them.  It remembers, per mount, the objects it found
 * intact together with the identity of their lower file (device, inode,
 * size, mtime, ctime), so that an unchanged object is hashed once per
 * mount and a changed one again.  Knows nothing of FUSE. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "hash.h"
#include "record.h"

struct kvt_verifier;

/* What a check found when it did not match. */
struct kvt_verify_result {
	uint64_t found_size; /* bytes the lower file held (short) */
	kvt_hash found_hash; /* hash of those bytes (mismatch) */
};

/* @capacity bounds the number of objects remembered (memory); beyond it
 * the oldest are forgotten and simply hashed again when next served. */
struct kvt_verifier *kvt_verifier_new(guint capacity);
void kvt_verifier_free(struct kvt_verifier *v);

/* True if @hash was found intact in the file that @st describes. */
bool kvt_verifier_known(struct kvt_verifier *v, const kvt_hash *hash,
			const struct stat *st);
void kvt_verifier_forget(struct kvt_verifier *v, const kvt_hash *hash);

/* Checks that @fd (described by @st) holds exactly @rec's bytes, hashing
 * it unless it is known intact (or @force).  Returns 1 when it was known,
 * 0 when it was hashed and matched, -EBADMSG on a hash mismatch, -ENODATA
 * when the file holds fewer or more bytes than @rec says (@res says what
 * was found), another -errno on an I/O error. */
int kvt_verify_fd(struct kvt_verifier *v, int fd, const struct stat *st,
		  const struct kvt_record *rec, bool force,
		  struct kvt_verify_result *res);

/* As kvt_verify_fd with @force, the bytes hashed read into @copy
 * (rec->size bytes): on 0, @copy holds exactly the verified bytes, for
 * the open to serve (memcopy.h) instead of reading the lower file again,
 * which costs a second trip and may have changed since. */
int kvt_verify_fd_into(struct kvt_verifier *v, int fd, const struct stat *st,
		       const struct kvt_record *rec, struct kvt_verify_result *res, void *copy);
