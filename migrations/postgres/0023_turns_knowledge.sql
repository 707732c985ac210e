-- Knowledge at scale: the ids of the offerings and passages a turn was given above the
-- knowledge threshold, as {"offerings": [...], "passages": [...]}; never their text.
-- NULL: the turn was given the whole catalog in its prompt (or none was retrieved).
ALTER TABLE turns ADD COLUMN knowledge JSONB;
