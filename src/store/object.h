/* Objects: the immutable, content-addressed files under objects/.
 *
 * An object's inode holds one anchor link, "<ab>/<hash>", through which
 * later stores of the same bytes find it (dedup), and one reference link
 * per name record, "<ab>/<hash>.<ref>".  Several mounts on several hosts
 * may share LOWERDIR (NFS, CephFS), so no mount may keep the only count of
 * who uses an object: the kernel's link count is the reference count, kept
 * atomically by link and unlink.  A record reads its own reference, so when
 * one mount unlinks the anchor while another dedups against it, the second
 * still holds the bytes through its reference (only dedup is lost).
 *
 * The anchor goes with the last reference, with no lock between mounts,
 * because two rules hold:
 *   - every link of an anchored inode but the anchor is a reference, and
 *     whoever removes a reference looks at the anchor's count after it
 *     (kvt_object_release): the last removal's look sees 1, whichever
 *     mount makes it;
 *   - so a new object gets its anchor only once its staged file's link is
 *     gone (kvt_object_anchor, after the record took the name): a staged
 *     link counted while another mount released the reference would make
 *     that mount keep an anchor that nobody then removes; and no mount can
 *     dedup against a staged file that a failed publication opens again
 *     for writing. */
#pragma once
#include <stdint.h>
#include <sys/stat.h>

#include "fault.h"
#include "record.h"

struct kvt_store;

/* Opens @rec's object (read-only flags as open(2)); @st gets its
 * metadata.  -ENOENT when it is gone, -EBADMSG when something else than a
 * regular file is in its place. */
int kvt_object_open(struct kvt_store *s, const struct kvt_record *rec, int flags,
		    struct stat *st);
int kvt_object_stat(struct kvt_store *s, const struct kvt_record *rec, struct stat *st);
/* Drops @rec's reference; the object goes with the last one. */
int kvt_object_release(struct kvt_store *s, const struct kvt_record *rec);
/* Removes a torn object: @rec's reference and, when it is the same inode,
 * the anchor, so that no later store dedups against torn bytes.  With
 * @unless_intact, an object whose bytes still hash to its name is not
 * torn, whatever @rec says of its size: it stays (without it, bytes whose
 * sync failed go, intact or not).  1 when it removed something, 0 when it
 * was gone already or is intact. */
int kvt_object_purge(struct kvt_store *s, const struct kvt_record *rec, bool unless_intact);
/* "objects/<ab>/<hash>.<ref>": the object a record uses, for messages. */
char *kvt_object_path(const struct kvt_record *rec);

/* Names in objects/: the fan-out directory "<ab>" (the hash's first
 * byte), the anchor "<hash>" and the reference "<hash>.<ref>" in it. */
void kvt_object_fanout(const kvt_hash *h, char out[3]);
bool kvt_object_is_fanout(const char *name);
char *kvt_object_anchor_name(const kvt_hash *h);
char *kvt_object_ref_name(const struct kvt_record *rec);
/* Parses an anchor or reference name found in fan-out directory @fanout. */
bool kvt_object_parse_name(const char *fanout, const char *name, kvt_hash *h,
			   bool *is_ref);

/* For the publication (publish.c): makes the staged file @stage_name
 * (open as @stage_fd) of @size bytes and hash @hash an object (a
 * reference, no anchor yet), or takes a new reference on an existing one
 * of the same hash, size and bytes (compared: see object.c).
 * Fills rec->hash, size, ref.  The staged file keeps its name.  *@dedup
 * says which it was. */
int kvt_object_make(struct kvt_store *s, const char *stage_name, int stage_fd, uint64_t size,
		    const kvt_hash *hash, struct kvt_record *rec, bool *dedup);
/* After the publication of new bytes, once the staged file's name is
 * gone (@fd: that file, still open): links the anchor to @rec's
 * reference, so that later stores share them.  None when the reference
 * went meanwhile (another mount replaced the record and released it, also
 * just after the link) or another anchor of the same hash came first. */
void kvt_object_anchor(struct kvt_store *s, const struct kvt_record *rec, int fd);
/* Undoes kvt_object_make (the record could not be installed): the
 * reference goes (dedup: released as any other). */
int kvt_object_unmake(struct kvt_store *s, const struct kvt_record *rec, bool dedup);
/* Makes @rec's object and its link durable (fsync of both). */
int kvt_object_sync(struct kvt_store *s, const struct kvt_record *rec);
/* Makes @rec's reference and anchor links durable (fsync of the fan-out
 * directory), not the bytes. */
int kvt_object_sync_links(struct kvt_store *s, const struct kvt_record *rec);

/* The injected error (fault.h) for @op on the bytes of @rec's object, on
 * its reference name; 0 when none (and always when faults are off). */
int kvt_object_fault_check(enum kvt_fault_op op, const struct kvt_record *rec);

static inline int kvt_object_fault(enum kvt_fault_op op, const struct kvt_record *rec)
{
	if (G_LIKELY(!kvt_faults_on))
		return 0;
	return kvt_object_fault_check(op, rec);
}
