/* Name records under names/: what a visible file name points to.
 *
 * Every change of a name is one atomic step on the lower directory: a
 * record written in this mount's staging area and renamed onto the name,
 * or a record renamed off the name into the staging area, where it is
 * read to learn which object it held and then removed.  The record a step
 * replaced or removed is exactly the one that was there (RENAME_EXCHANGE),
 * even when another mount changed the name a moment before. */
#pragma once
#include <stdbool.h>
#include <sys/stat.h>

#include "lower.h"
#include "record.h"

struct kvt_store;

/* Metadata a record is written with: the name's owner, group and
 * permission bits go into the record (record.h); with @set_times, @atime
 * and @mtime (each unless UTIME_OMIT) onto the record file, whose times
 * the name shows. */
struct kvt_meta {
	mode_t mode;
	uid_t uid;
	gid_t gid;
	bool set_times;
	struct timespec atime, mtime;
};

/* @r with @meta's owner and mode, as it will be written. */
void kvt_meta_apply(const struct kvt_meta *meta, struct kvt_record *r);

/* Reads the record @d/@name; @st gets the record file's metadata (its
 * own: kvt_record_show gives the name's).
 * -EBADMSG for a record that does not parse or is not a regular file. */
int kvt_name_read(struct kvt_dir *d, const char *name, struct kvt_record *rec,
		  struct stat *st);

/* Reads the record @d/@name and stats its object into @ost (a record of
 * another kind than a file has none: @ost gets its size only), as one
 * consistent look although other mounts change the name meanwhile: when
 * the object is missing, the name is read again, and a record that
 * replaced the one read (whose object its replacer then released) is taken
 * instead.  With @known, @rec already holds the record that @st (the
 * name's) describes, and is read only if its object is missing; else
 * @held (or -1) holds the name (kvt_dir_hold) that @st describes, and the
 * record is read from there first.
 * *@fresh: @rec and @st were read here.  Returns 0;
 * KVT_LOOKUP_MISSING when the record that holds the name has no object,
 * or something else than a regular file in its place (torn); -ENOENT when
 * the name went; -EBADMSG for a record that does not parse; -EIO when the
 * name changed under every look. */
enum { KVT_LOOKUP_MISSING = 1 };
int kvt_name_lookup(struct kvt_store *s, struct kvt_dir *d, const char *name, bool known,
		    int held, struct kvt_record *rec, struct stat *st, struct stat *ost,
		    bool *fresh);
/* Reads the record @d/@name as kvt_name_read, without moving its access
 * time (the visible file's, which evictors read) where O_NOATIME is
 * allowed: for a walk of every record. */
int kvt_name_peek(struct kvt_dir *d, const char *name, struct kvt_record *rec);

/* Writes @rec with @meta to a new file in staging, its name in *@tmp and
 * its inode number in *@ino (may be NULL), for kvt_name_place.  With @sync
 * the record's bytes are written out (not committed), so that on a
 * journaling file system a power cut leaves the name with the old record
 * or the new one, never an empty one. */
int kvt_name_stage(struct kvt_store *s, const struct kvt_record *rec,
		   const struct kvt_meta *meta, bool sync, char **tmp, ino_t *ino);
/* The same into the empty staged file @fd (@name), made beforehand with
 * its metadata in @st (a stage's record file): its inode number
 * is known before the publication.  *@dirty: an earlier attempt wrote to
 * it (cleared on success; set when this one fails). */
int kvt_name_stage_into(const struct kvt_record *rec, const struct kvt_meta *meta, bool sync,
			int fd, const char *name, struct stat *st, bool *dirty);
/* Atomically puts the record staged at @tmp at @d/@name.  A record it
 * replaced is returned in @old (old->ref[0] != 0), whose object the
 * caller releases or keeps.  On failure @tmp stays, the caller's to
 * remove.  *@tmp_left (may be NULL: then it is done here) says that @tmp
 * still names the record too, for the caller to remove once it holds no
 * lock (a link made the name, where rename flags are refused). */
int kvt_name_place(struct kvt_store *s, const char *tmp, struct kvt_dir *d,
		   const char *name, struct kvt_record *old, bool *tmp_left);
/* Replaces the record at @d/@name by @rec (the same object: new xattrs or
 * metadata) if it is still @rec's version, else -ESTALE, and leaves
 * another mount's version there.  The record is taken off the name, then
 * the new one put there: a reader on another mount may miss the name in
 * between, and a crash in between loses it (a miss, never other bytes);
 * a publication there in between replaces this version (then 0).
 * @rec_st gets the new record's metadata (st_ino 0 if it cannot tell). */
int kvt_name_rewrite(struct kvt_store *s, struct kvt_dir *d, const char *name,
		     const struct kvt_record *rec, const struct kvt_meta *meta,
		     struct stat *rec_st);
/* Atomically puts @rec at @d/@name if nothing is there: -EEXIST if
 * something is (symlink(2), mknod(2)). */
int kvt_name_create(struct kvt_store *s, struct kvt_dir *d, const char *name,
		    const struct kvt_record *rec, const struct kvt_meta *meta);
/* Atomically removes the record @d/@name, returned in @old (ref[0] == 0
 * when it did not parse) for the caller to release. */
int kvt_name_take(struct kvt_store *s, struct kvt_dir *d, const char *name,
		  struct kvt_record *old);
/* Unlink: kvt_name_take, and its object released. */
int kvt_name_remove(struct kvt_store *s, struct kvt_dir *d, const char *name);

/* "dir/name" below the names' root, for messages; g_free() it. */
char *kvt_name_path(struct kvt_store *s, struct kvt_dir *d, const char *name);

/* rename(2) of a published name or a directory, with @flags (0,
 * RENAME_NOREPLACE, RENAME_EXCHANGE), marked in moves/ while it lasts
 * (reclaim.c).  A directory follows rename(2)'s rules.  A record that a
 * file replaced is returned in @replaced for the caller to release (or
 * keep while someone may still open it).  A file's record is taken off
 * its name first, so exactly it moves, whatever another mount publishes
 * at the source name meanwhile; a crash in between loses the name. */
int kvt_name_rename(struct kvt_store *s, struct kvt_dir *from, const char *fname,
		    struct kvt_dir *to, const char *tname, unsigned int flags,
		    struct kvt_record *replaced);

/* Removes a torn name and its object.  The record @d/@name goes if it
 * still names @rec's reference (or does not parse: then @rec is NULL;
 * another mount's record put there since stays); then @rec's object
 * (kvt_object_purge, with @unless_intact).  @name may be NULL: the object
 * alone.  1 when it removed something, 0 when another purge had already. */
int kvt_name_purge(struct kvt_store *s, struct kvt_dir *d, const char *name,
		   const struct kvt_record *rec, bool unless_intact);
