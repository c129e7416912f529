/* Name records: what a visible file name points to.
 *
 * A record is a small regular file under LOWERDIR/names/ at the visible
 * path.  Its content names the object (hash, size, per-record reference)
 * and carries the visible file's owner, group and permission bits, and
 * the client's own user.* xattrs.  The lower file itself is root's and
 * 0600 whoever owns the name: nothing in the store is any user's, and
 * the owner a name shows is what kvtierfs wrote, not what a chown on the
 * lower disk says.  Its times are the visible file's, set by kvtierfs
 * alone (root sets any time on a file; a time in the record would make
 * every utimes a new record file, and a new inode number).  Format, one
 * item per line:
 *
 *   kvtierfs-record 1
 *   hash <32 hex: XXH3-128 of the object>
 *   size <decimal bytes>
 *   ref <reference id>
 *   owner <uid> <gid>                 (store format 2: both lines)
 *   mode <octal permission bits>
 *   xattr <hex name> <hex value>      (zero or more)
 *   check <16 hex: XXH3-64 of every byte above this line>
 *
 * A record of format 1 has no owner or mode line: the lower file's own
 * owner and mode are the name's (it was chowned to its owner).
 *
 * The check line makes a truncated or overwritten record a parse error,
 * never a record that points at the wrong object.
 *
 * A symbolic link or a special file has no object: its record says what
 * it is instead of hash, size and ref (a record without a kind line is a
 * regular file, as every record was before):
 *
 *   kind symlink                      then: target <hex of the target>
 *   kind fifo | kind sock
 *   kind chr | kind blk               then: rdev <major>:<minor> */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "hash.h"

#define KVT_REF_MAX 48
#define KVT_RECORD_MAX (4u << 20)

enum kvt_kind {
	KVT_KIND_FILE,    /* bytes in an object */
	KVT_KIND_SYMLINK,
	KVT_KIND_FIFO,
	KVT_KIND_SOCK,
	KVT_KIND_CHR,
	KVT_KIND_BLK,
};

struct kvt_record {
	kvt_hash hash;      /* files: their object */
	uint64_t size;
	char ref[KVT_REF_MAX];
	GHashTable *xattrs; /* char *name -> GBytes *value; NULL when none */
	enum kvt_kind kind;
	char *target;       /* symlinks */
	dev_t rdev;         /* device nodes */
	bool has_meta;      /* owner and mode are the record's */
	uid_t uid;
	gid_t gid;
	mode_t mode;        /* permission bits (07777) */
};

void kvt_record_init(struct kvt_record *r);
void kvt_record_clear(struct kvt_record *r);
void kvt_record_copy(struct kvt_record *dst, const struct kvt_record *src);
GHashTable *kvt_xattrs_new(void);
GHashTable *kvt_xattrs_dup(GHashTable *src);
/* Same names with the same values (NULL is an empty table). */
bool kvt_xattrs_equal(GHashTable *a, GHashTable *b);

/* The file type (S_IF*) of a record's kind, and the kind of a mode; -1
 * for a type kvtierfs does not store. */
mode_t kvt_kind_type(enum kvt_kind kind);
int kvt_kind_of_mode(mode_t mode);

/* The metadata a name shows: @st is its record file's (lower) stat, with
 * the owner, group and permission bits that @r carries put over it (a
 * record of format 1 carries none: @st is left as it is). */
void kvt_record_show(const struct kvt_record *r, struct stat *st);

GString *kvt_record_encode(const struct kvt_record *r);
/* -EBADMSG when @buf is not a complete, well-formed record. */
int kvt_record_parse(const char *buf, size_t len, struct kvt_record *r);
