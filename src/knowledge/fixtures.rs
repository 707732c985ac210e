//! Invented tenants for tests and benchmarks, generated from a seed (no real business, C1/C9):
//! a Spanish music shop and an English outdoor-gear shop of any size, the latter with a few
//! documents. Names are combinations of a kind, a brand, a model and a finish, so every name is
//! unique and a name deep in the list differs from its neighbours by one or two words.

use crate::config::knowledge::Passage;
use crate::config::{Catalog, Offering, PaymentOption, Price, TenantConfig};

/// A small deterministic generator (a 64-bit LCG): the same seed, the same catalog.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// `(display, id part)` pairs.
type Words = &'static [(&'static str, &'static str)];

const ES_KINDS: Words = &[
    ("Guitarra clásica", "guitarra-clasica"),
    ("Guitarra eléctrica", "guitarra-electrica"),
    ("Ukelele", "ukelele"),
    ("Violín", "violin"),
    ("Violonchelo", "violonchelo"),
    ("Piano digital", "piano-digital"),
    ("Batería", "bateria"),
    ("Cajón flamenco", "cajon-flamenco"),
    ("Flauta travesera", "flauta-travesera"),
    ("Saxofón alto", "saxofon-alto"),
    ("Trompeta", "trompeta"),
    ("Bajo eléctrico", "bajo-electrico"),
];
const ES_BRANDS: Words = &[
    ("Andina", "andina"),
    ("Brisa", "brisa"),
    ("Cóndor", "condor"),
    ("Dúo", "duo"),
    ("Estrella", "estrella"),
    ("Faro", "faro"),
    ("Garza", "garza"),
    ("Halcón", "halcon"),
    ("Índigo", "indigo"),
    ("Jara", "jara"),
];
const ES_MODELS: Words = &[
    ("de estudio", "estudio"),
    ("de concierto", "concierto"),
    ("de escenario", "escenario"),
    ("de viaje", "viaje"),
    ("maestro", "maestro"),
];
const ES_FINISHES: Words = &[
    ("acabado nogal", "nogal"),
    ("acabado cerezo", "cerezo"),
    ("acabado ébano", "ebano"),
    ("acabado arce", "arce"),
    ("acabado caoba", "caoba"),
];

const EN_KINDS: Words = &[
    ("Tent", "tent"),
    ("Sleeping bag", "sleeping-bag"),
    ("Backpack", "backpack"),
    ("Rain jacket", "rain-jacket"),
    ("Hiking boots", "hiking-boots"),
    ("Camping stove", "camping-stove"),
    ("Headlamp", "headlamp"),
    ("Hammock", "hammock"),
    ("Trekking poles", "trekking-poles"),
    ("Water filter", "water-filter"),
];
const EN_BRANDS: Words = &[
    ("Northwind", "northwind"),
    ("Ridgeline", "ridgeline"),
    ("Cedar Peak", "cedar-peak"),
    ("Bluefjord", "bluefjord"),
    ("Stonepath", "stonepath"),
    ("Larchwood", "larchwood"),
    ("Kestrel", "kestrel"),
    ("Driftwood", "driftwood"),
    ("Summitway", "summitway"),
    ("Fernhollow", "fernhollow"),
];
const EN_MODELS: Words = &[
    ("Lite", "lite"),
    ("Trail", "trail"),
    ("Expedition", "expedition"),
    ("Family", "family"),
];
const EN_FINISHES: Words = &[
    ("slate", "slate"),
    ("ember", "ember"),
    ("moss", "moss"),
    ("glacier", "glacier"),
    ("sand", "sand"),
];

/// The `i`th combination of the four lists (a series number once they run out).
fn combination(
    i: usize,
    lists: [Words; 4],
    name: impl Fn([&str; 4]) -> String,
) -> (String, String) {
    let mut rest = i;
    let mut display = [""; 4];
    let mut id = Vec::new();
    for (slot, list) in lists.iter().enumerate() {
        let (d, part) = list[rest % list.len()];
        display[slot] = d;
        id.push(part);
        rest /= list.len();
    }
    let mut name = name(display);
    let mut id = id.join("-");
    if rest > 0 {
        name.push_str(&format!(" serie {}", rest + 1));
        id.push_str(&format!("-{}", rest + 1));
    }
    (id, name)
}

/// A Spanish music shop of `n` offerings (EUR). Offering `i`'s name and price are the same for
/// every `n` and `seed`-independent in their names.
pub fn spanish_catalog(n: usize, seed: u64) -> Catalog {
    let mut random = Seeded(seed);
    let offerings = (0..n)
        .map(|i| {
            let (id, name) = combination(i, [ES_KINDS, ES_BRANDS, ES_MODELS, ES_FINISHES], |w| {
                format!("{} {} {}, {}", w[0], w[1], w[2], w[3])
            });
            let kind = ES_KINDS[i % ES_KINDS.len()].0.to_lowercase();
            Offering {
                id,
                name,
                description: format!(
                    "Instrumento de la línea {} pensado para quien toca a diario. Incluye funda \
                     y garantía de dos años. Ideal si buscas una {kind} fiable.",
                    ES_MODELS[(i / 120) % ES_MODELS.len()].0
                ),
                price: Price {
                    amount: 4_900 + (random.next() % 250_000) as i64,
                    currency: "EUR".into(),
                },
                duration_hours: None,
                schedule: None,
                url: None,
            }
        })
        .collect();
    Catalog {
        business_name: "Casa Armonía (inventada)".into(),
        currency: "EUR".into(),
        offerings,
        faq: vec![],
        payment_options: vec![PaymentOption {
            id: "tres-plazos".into(),
            description: "Tres pagos mensuales iguales sin intereses.".into(),
        }],
    }
}

/// An English outdoor-gear shop of `n` offerings (USD).
pub fn english_catalog(n: usize, seed: u64) -> Catalog {
    let mut random = Seeded(seed);
    let offerings = (0..n)
        .map(|i| {
            let (id, name) = combination(i, [EN_KINDS, EN_BRANDS, EN_MODELS, EN_FINISHES], |w| {
                format!("{} {} {} {}", w[1], w[2], w[0], w[3])
            });
            let kind = EN_KINDS[i % EN_KINDS.len()].0.to_lowercase();
            Offering {
                id,
                name,
                description: format!(
                    "A {kind} built for weekend trips and long hauls alike. Ships in recycled \
                     packaging."
                ),
                price: Price {
                    amount: 1_900 + (random.next() % 60_000) as i64,
                    currency: "USD".into(),
                },
                duration_hours: None,
                schedule: None,
                url: None,
            }
        })
        .collect();
    Catalog {
        business_name: "Trailhead Supply (invented)".into(),
        currency: "USD".into(),
        offerings,
        faq: vec![],
        payment_options: vec![PaymentOption {
            id: "split".into(),
            description: "Pay in four interest-free instalments.".into(),
        }],
    }
}

fn passage(file: &str, n: usize, heading: &str, text: &str) -> Passage {
    let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
    Passage {
        id: format!("{stem}#{n}"),
        file: file.into(),
        heading: heading.into(),
        text: text.into(),
    }
}

/// The English shop's documents: policies, a notice and care guides.
pub fn english_documents() -> Vec<Passage> {
    let mut docs = vec![
        passage(
            "returns.md",
            1,
            "Returns",
            "Unused gear can be returned within 45 days of delivery for a full refund. Worn \
             boots and opened water filters cannot be returned for hygiene reasons.",
        ),
        passage(
            "returns.md",
            2,
            "Returns > How to return",
            "Print the prepaid label from your order email, pack the item in its original box \
             and drop it at any parcel point. Refunds reach your card within five working days.",
        ),
        passage(
            "shipping.md",
            1,
            "Shipping",
            "Orders leave our warehouse the next working day. Delivery takes two to four days \
             within the country; remote islands take up to ten.",
        ),
        passage(
            "notices.md",
            1,
            "Inventory closure",
            "The warehouse is closed for the yearly inventory count during the first week of \
             February: orders placed that week ship on the following Monday.",
        ),
        passage(
            "warranty.md",
            1,
            "Warranty",
            "Every item carries a two-year warranty against manufacturing defects. Zippers, \
             buckles and seams are repaired free of charge in our workshop.",
        ),
        passage(
            "care.md",
            1,
            "Care > Down sleeping bags",
            "Wash a down sleeping bag rarely, in a front-loading machine on a gentle cycle with \
             down soap, then tumble dry on low heat with three clean tennis balls.",
        ),
        passage(
            "care.md",
            2,
            "Care > Waterproof jackets",
            "Reproof a rain jacket once a season: wash it with technical cleaner, then spray \
             the outer fabric and dry it on low heat to reactivate the coating.",
        ),
    ];
    // Care notes per kind of gear, as a shop's help pages would hold.
    for (i, (kind, _)) in EN_KINDS.iter().enumerate() {
        docs.push(passage(
            "guides.md",
            i + 1,
            &format!("Guides > Choosing a {}", kind.to_lowercase()),
            &format!(
                "Choosing a {}: weigh what you carry, how many nights you spend outdoors and \
                 the coldest weather you expect. Our staff answer questions in the shop.",
                kind.to_lowercase()
            ),
        ));
    }
    docs
}

/// The Spanish shop's documents: two short pages, well under the threshold.
pub fn spanish_documents() -> Vec<Passage> {
    vec![
        passage(
            "envios.md",
            1,
            "Envíos",
            "Enviamos a toda la península en 48 horas; a las islas, en cinco días laborables.",
        ),
        passage(
            "devoluciones.md",
            1,
            "Devoluciones",
            "Tienes 30 días para devolver un instrumento sin usar, en su caja original.",
        ),
    ]
}

/// The demo tenant's rules and tools around `catalog` and `knowledge`: the offering field's
/// values left to the catalog (as `tools.json` may now do) and no flow tied to an offering.
pub fn tenant(catalog: Catalog, knowledge: Vec<Passage>) -> TenantConfig {
    let mut config = crate::config::examples::demo_tenant();
    config.prompt = format!(
        "You are the front desk of {}. Answer in the contact's language, briefly.",
        catalog.business_name
    );
    config.catalog = catalog;
    config.knowledge = knowledge;
    if let Some(tools) = config.tools.as_mut() {
        for field in tools.fields.iter_mut().filter(|f| f.offering) {
            field.values.clear();
        }
        for flow in &mut tools.flows {
            flow.offering = None;
        }
    }
    config
}

/// The invented 3,000-offering Spanish tenant (`n` offerings), its language named.
pub fn spanish_tenant(n: usize) -> TenantConfig {
    let mut config = tenant(spanish_catalog(n, 7), spanish_documents());
    config.rules.knowledge.language = Some("es".into());
    config
}

/// The invented 2,000-offering English tenant (`n` offerings) with its documents, which it
/// retrieves too: its threshold for documents is lowered to 300 tokens, as a tenant may.
pub fn english_tenant(n: usize) -> TenantConfig {
    let mut config = tenant(english_catalog(n, 11), english_documents());
    config.rules.knowledge.prompt_document_tokens = 300;
    config
}
