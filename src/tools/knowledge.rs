//! The turn's tools above the knowledge threshold (`crate::knowledge`): `search_catalog`, within
//! the turn's reads, and the offering a set_field names, given to the model with its catalog
//! line. What they give is recorded as ids (`TurnTools::given`), never text.

use super::*;

impl TurnTools {
    /// Above the knowledge threshold: the catalog position of the offering a set_field on the
    /// offering field names (`None`: another call, or the catalog is in the prompt).
    pub(super) fn offering_named(&self, name: &str, args: &Value) -> Option<u32> {
        if name != "set_field" || !self.knowledge.layout().catalog_retrieved {
            return None;
        }
        let field = self.tools()?.fields.iter().find(|f| f.offering)?;
        (args.get("field")?.as_str()? == field.id).then_some(())?;
        self.knowledge.offering(args.get("value")?.as_str()?)
    }

    /// An offering a call named is given to the model: its catalog line in the result (the
    /// next steps can quote it), its id in the turn's record.
    pub(super) fn give_offering(&mut self, position: u32, result: &mut Value) {
        let Some(o) = self.config.catalog.offerings.get(position as usize) else {
            return;
        };
        let mut line = String::new();
        crate::knowledge::lines::push_offering(&mut line, o);
        if let Some(object) = result.as_object_mut() {
            object.insert("offering".into(), Value::String(line));
        }
        self.given.add_offering(position);
    }

    /// `search_catalog` (above the knowledge threshold): the catalog and documents searched in
    /// memory, within the turn's reads; what it returns is recorded as given (ids only).
    pub(super) fn search(&mut self, args: &Value) -> Value {
        let layout = self.knowledge.layout();
        if !layout.retrieves() {
            return json!({"available": false, "error": "not offered"});
        }
        if self.read_attempts >= MAX_READS {
            self.refused
                .push(format!("{SEARCH_TOOL} (over the {MAX_READS}-read limit)"));
            return json!({"available": false, "reason": "read_limit"});
        }
        self.read_attempts += 1;
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let found = self.knowledge.search(query);
        let mut offerings = String::new();
        for &i in &found.offerings {
            if let Some(o) = self.config.catalog.offerings.get(i as usize) {
                crate::knowledge::lines::push_offering(&mut offerings, o);
            }
            self.given.add_offering(i);
        }
        let mut passages = String::new();
        for &i in &found.passages {
            if let Some(p) = self.config.knowledge.get(i as usize) {
                crate::knowledge::lines::push_passage(&mut passages, p, &self.fence);
            }
            if !self.given.passages.contains(&i) {
                self.given.passages.push(i);
            }
        }
        json!({
            "available": true,
            "offerings": offerings,
            "passages": passages,
            "found": found.offerings.len() + found.passages.len()
        })
    }
}
