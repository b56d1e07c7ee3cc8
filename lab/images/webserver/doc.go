// Package webserver is the nginx- and httpd-compatible static web server
// that the lab's web image runs for pods that ask for nginx:* or httpd:*
// images. It serves the upstream images' document roots
// (/usr/share/nginx/html, /usr/local/apache2/htdocs) on port 80 with their
// default pages, so configMap mounts over those directories work; honours
// the listen, root and index directives of /etc/nginx (so a configMap over
// /etc/nginx/conf.d can move the port); logs requests to stdout in the
// upstream access-log formats; and stops as the real servers do on
// SIGTERM, SIGQUIT and SIGWINCH.
package webserver
