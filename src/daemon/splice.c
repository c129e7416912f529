#include "splice.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Holds a whole FUSE read (max_read is 1 MiB). */
#define PIPE_SIZE (1 << 20)

struct thread_pipe {
	int fd[2];
};

static void pipe_free(gpointer p)
{
	struct thread_pipe *tp = p;

	close(tp->fd[0]);
	close(tp->fd[1]);
	g_free(tp);
}

static GPrivate thread_pipe = G_PRIVATE_INIT(pipe_free);

static struct thread_pipe *get_pipe(void)
{
	struct thread_pipe *tp = g_private_get(&thread_pipe);

	if (tp)
		return tp;
	tp = g_new(struct thread_pipe, 1);
	if (pipe2(tp->fd, O_CLOEXEC)) {
		g_free(tp);
		return NULL;
	}
	if (fcntl(tp->fd[1], F_SETPIPE_SZ, PIPE_SIZE) < PIPE_SIZE) {
		pipe_free(tp);
		return NULL;
	}
	g_private_set(&thread_pipe, tp);
	return tp;
}

void kvt_splice_reset(int rfd)
{
	char scratch[65536];
	int left = 0;

	while (ioctl(rfd, FIONREAD, &left) == 0 && left > 0)
		if (read(rfd, scratch, MIN((size_t)left, sizeof(scratch))) <= 0)
			break;
}

int kvt_splice_fill(int fd, off_t off, size_t len, size_t *got)
{
	struct thread_pipe *tp = get_pipe();
	loff_t pos = off;
	size_t done = 0;

	*got = 0;
	if (!tp || len > PIPE_SIZE)
		return -ENOSYS;
	while (done < len) {
		ssize_t n = splice(fd, &pos, tp->fd[1], NULL, len - done, SPLICE_F_MOVE);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : -ENODATA;

			kvt_splice_reset(tp->fd[0]);
			*got = done;
			return err;
		}
		done += n;
	}
	*got = done;
	return tp->fd[0];
}
