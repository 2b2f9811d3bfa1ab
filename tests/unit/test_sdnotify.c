/* sdnotify: a real AF_UNIX datagram receiver stands in for systemd. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/base/sdnotify.h"
#include "tests/unit/fixtures.h"

/* Binds a receiver at path ("@name" = abstract) and returns its fd. */
static int receiver(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t plen = strlen(path);
    memcpy(sa.sun_path, path, plen);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
    if (path[0] == '@') {
        sa.sun_path[0] = '\0';
    } else {
        len++;
        unlink(path);
    }
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, len), 0);
    return fd;
}

static void recv_eq(int fd, const char *want)
{
    char buf[8192];
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
    ck_assert_int_ge(n, 0);
    buf[n] = '\0';
    ck_assert_str_eq(buf, want);
}

START_TEST(test_unset_is_noop)
{
    unsetenv("NOTIFY_SOCKET");
    ck_assert_int_eq(sl_sdnotify("READY=1", NULL, 0), 0);
    setenv("NOTIFY_SOCKET", "", 1);
    ck_assert_int_eq(sl_sdnotify("READY=1", NULL, 0), 0);
}
END_TEST

START_TEST(test_path_socket)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/sl-notify-test.%d", (int)getpid());
    int fd = receiver(path);
    setenv("NOTIFY_SOCKET", path, 1);
    ck_assert_int_eq(sl_sdnotify("READY=1\nSTATUS=serving", NULL, 0), 1);
    recv_eq(fd, "READY=1\nSTATUS=serving");
    ck_assert_int_eq(sl_sdnotifyf(NULL, 0, "STATUS=%d workers", 3), 1);
    recv_eq(fd, "STATUS=3 workers");
    close(fd);
    unlink(path);
}
END_TEST

START_TEST(test_abstract_socket)
{
    char path[64];
    snprintf(path, sizeof(path), "@sl-notify-test.%d", (int)getpid());
    int fd = receiver(path);
    setenv("NOTIFY_SOCKET", path, 1);
    ck_assert_int_eq(sl_sdnotify("STOPPING=1", NULL, 0), 1);
    recv_eq(fd, "STOPPING=1");
    close(fd);
}
END_TEST

START_TEST(test_errors)
{
    char err[256] = "";
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    ck_assert_int_eq(sl_sdnotify("READY=1", err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "relative/path"));
    /* Nobody listening: an error code, not a crash or a signal. */
    setenv("NOTIFY_SOCKET", "/tmp/sl-notify-test-nobody-listens", 1);
    ck_assert_int_lt(sl_sdnotify("READY=1", err, sizeof(err)), 0);
    char *big = malloc(SL_SDNOTIFY_MAX + 2);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', SL_SDNOTIFY_MAX + 1);
    big[SL_SDNOTIFY_MAX + 1] = '\0';
    ck_assert_int_eq(sl_sdnotify(big, err, sizeof(err)), -EMSGSIZE);
    free(big);
    unsetenv("NOTIFY_SOCKET");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sdnotify");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_unset_is_noop);
    tcase_add_test(tc, test_path_socket);
    tcase_add_test(tc, test_abstract_socket);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
