-- 020: the kind of media a contact's message was (audio | image | video | unsupported); NULL for
-- typed text. The media's URL is never stored: the text holds a marker or the transcript.
ALTER TABLE turns ADD COLUMN media_kind text;
