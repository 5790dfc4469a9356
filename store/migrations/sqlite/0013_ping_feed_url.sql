-- The feed that weblogUpdates.extendedPing names beside the weblog's url
-- (its feedUrl), listed as weblogs.com's rssUrl in changes.xml and the
-- archives; '' for the other dialects. The ping's url is now the URL the
-- publisher submitted as the weblog's. Before, an extendedPing recorded its
-- feed as the url and the weblog's URL was not kept: those rows name their
-- url as their feed, so the lists say what it is.
ALTER TABLE pings ADD COLUMN feed_url TEXT NOT NULL DEFAULT '';
UPDATE pings SET feed_url = url WHERE dialect = 'xmlrpc-extended';
